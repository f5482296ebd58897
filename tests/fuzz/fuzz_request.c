/*
 * fuzz_request.c - libFuzzer target for the request path of charterd, from the bytes a
 * transport hands in to the first database command: envelope decode under the size cap and
 * the allocation budget, method lookup, bearer token check, the method's request decode and
 * the handler's own validation.
 *
 * The store the handlers get is connected to a stand-in that answers the connection's
 * CLIENT SETNAME and then goes away, so every database command fails at once (UNAVAILABLE):
 * whatever a request reaches past validation ends at its first database call, and the answer
 * must still be a well-formed RpcResponse. Seeds carry the operator token below, so mutations
 * get past authentication.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "rpc/auth.h"
#include "rpc/call.h"
#include "charter.pb-c.h"
#include "rpc/dispatch.h"
#include "core/log.h"
#include "db/store.h"
#include "policy/workflow.h"

/* The tokens the seeds in tests/fuzz/corpus/fuzz_request carry. */
#define FUZZ_OPERATOR_TOKEN "fuzz-operator-token-0123456789abcdef"
#define FUZZ_VIEWER_TOKEN "fuzz-viewer-token-0123456789abcdefgh"

extern const char embedded_workflow[];
extern const size_t embedded_workflow_len;

static server_env fuzz_env;
static auth_tokens fuzz_auth;
static dispatch_ctx fuzz_dispatch;
static store *fuzz_store;
static workflow *fuzz_wf;

/* Accepts one connection on fd, answers the first command (CLIENT SETNAME) with +OK and
 * closes it: store_open succeeds, and the socket file is gone before any later command. */
static void *fuzz_standin(void *arg)
{
    int fd = *(int *)arg;
    int c = accept(fd, NULL, NULL);
    if (c >= 0) {
        char buf[512];
        if (read(c, buf, sizeof buf) > 0 && write(c, "+OK\r\n", 5) != 5) {
            fprintf(stderr, "fuzz_request: the stand-in could not answer\n");
        }
        close(c);
    }
    return NULL;
}

static int fuzz_open_store(void)
{
    char dir[] = "/tmp/charter-fuzz-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        return -1;
    }
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/redis.sock", dir);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 1) != 0) {
        return -1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, fuzz_standin, &fd) != 0) {
        return -1;
    }
    char url[160];
    snprintf(url, sizeof url, "unix://%s", sa.sun_path);
    int rc = store_open(url, "fuzz", 1000, &fuzz_store);
    if (rc != 0) {
        shutdown(fd, SHUT_RDWR); /* wakes the stand-in's accept when nothing connected */
    }
    pthread_join(t, NULL);
    close(fd);
    unlink(sa.sun_path);
    rmdir(dir);
    return rc == 0 ? 0 : -1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN); /* as charterd: a write to the vanished stand-in is an error */
    log_init(true, false);
    char err[512];
    if (workflow_load_buffer(embedded_workflow, embedded_workflow_len, &fuzz_wf, err, sizeof err) !=
        0) {
        fprintf(stderr, "fuzz_request: the embedded workflow does not load: %s\n", err);
        abort();
    }
    if (auth_init(&fuzz_auth, FUZZ_OPERATOR_TOKEN, FUZZ_VIEWER_TOKEN, NULL) != 0 ||
        fuzz_open_store() != 0) {
        fprintf(stderr, "fuzz_request: cannot set up the tokens or the store\n");
        abort();
    }
    fuzz_env.wf = fuzz_wf;
    fuzz_env.graph = "fuzz";
    fuzz_env.version = "fuzz";
    fuzz_env.workers = 1;
    memset(fuzz_env.evaluator, '0', 64);
    fuzz_env.limits.max_message = (size_t)4 * 1024 * 1024;
    fuzz_env.limits.max_ancestry = 10000;
    fuzz_env.limits.max_ids = 1000;
    fuzz_env.limits.max_content = (size_t)1024 * 1024;
    fuzz_env.limits.default_timeout_ms = 1000;
    fuzz_env.limits.max_timeout_ms = 1000;
    fuzz_dispatch.env = &fuzz_env;
    fuzz_dispatch.auth = &fuzz_auth;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *resp = NULL;
    size_t resp_len = 0;
    if (dispatch_serve(&fuzz_dispatch, fuzz_store, data, size, 0, &resp, &resp_len) != 0) {
        return 0; /* out of memory: nothing to answer with */
    }
    /* Every answer is a well-formed RpcResponse; a request that reached no handler never gets
     * OK. */
    Charter__V1__RpcResponse *r = charter__v1__rpc_response__unpack(NULL, resp_len, resp);
    if (r == NULL || r->message == NULL) {
        fprintf(stderr, "fuzz_request: the answer is not an RpcResponse\n");
        abort();
    }
    charter__v1__rpc_response__free_unpacked(r, NULL);
    free(resp);
    return 0;
}
