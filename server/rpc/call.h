/*
 * call.h - what a handler gets for one RPC, and how it answers.
 *
 * dispatch.c decodes the envelope, authenticates, looks the method up in protobuf-c's
 * service descriptors and calls the handler registered for it with a call. Everything a
 * handler allocates for its response comes from the call's arena (call_alloc, call_strdup)
 * and is released in one go after the response has been packed, so a handler never frees a
 * response message field by field.
 */
#ifndef CHARTER_CALL_H
#define CHARTER_CALL_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/limits.h"
#include "gates/gate.h"
#include "core/ids.h"
#include "core/role.h"
#include "core/status.h"
#include "db/store.h"
#include "policy/workflow.h"
#include "rpc/serving.h"

/* gRPC status numbers used in RpcResponse.code. */
enum {
    RPC_OK = 0,
    RPC_INVALID_ARGUMENT = 3,
    RPC_DEADLINE_EXCEEDED = 4,
    RPC_NOT_FOUND = 5,
    RPC_ALREADY_EXISTS = 6,
    RPC_PERMISSION_DENIED = 7,
    RPC_RESOURCE_EXHAUSTED = 8,
    RPC_FAILED_PRECONDITION = 9,
    RPC_UNIMPLEMENTED = 12,
    RPC_INTERNAL = 13,
    RPC_UNAVAILABLE = 14,
    RPC_UNAUTHENTICATED = 16,
};

/* Process-wide, read-only after startup. */
typedef struct {
    /* The workflow charterd was started with: the default of CreateRun. Kept by registry.h;
     * every other operation acts under the workflow its run pinned. */
    const workflow *wf;
    service_limits limits;
    const char *graph;
    const char *version;
    unsigned workers;
    /* The evaluator's fingerprint (evaluator_fingerprint: declared version, workflow), hex
     * SHA-256, recorded in every decision event that records no workflow of its own. */
    char evaluator[65];
    /* charterd was started with an integrity key (the key itself lives in integrity.c only). */
    bool keyed;
    /* --scripted-only (a shared demo): live runs and grant controls are refused. */
    bool scripted_only;
    /* The archive folder (--archive-dir, or <data folder>/archive with --retention), NULL when
     * charterd archives nothing: a call through a context that left the database with its run
     * is answered from the run's archive there (gates/archived.h). */
    const char *archive_dir;
    /* The serving status kept fresh by the health monitor (rpc/serving.h): what Health answers
     * when it is served without a store (on NNG's callback thread). NULL: every Health makes its
     * own round trip. */
    const serving *serving;
} server_env;

typedef struct call_block call_block;

/* One RPC in progress. Owned by the worker that serves it. */
typedef struct {
    const server_env *env;
    store *st;      /* the worker's store; its timeout is set to the call's deadline */
    call_role role; /* ROLE_OPERATOR or ROLE_VIEWER (Health may be ROLE_NONE) */
    int timeout_ms;
    int status;        /* RPC_* set by call_fail */
    char message[256]; /* reason for a non-OK status */
    call_block *arena; /* blocks freed by call_release */
    /* The call's request id (printable, at most 128 bytes): the caller's "x-request-id" or
     * "traceparent" trace-id, or one made; returned in the reply and written in the log. */
    char request_id[129];
    /* Metadata "grpc-health-last" (grpc.health.v1.Health/Watch), or NULL. */
    const char *watch_last;
    /* The call holds one of the long-wait slots (call_wait_begin). */
    bool waiting;
    /* The tenant (graph) the call acts on (tenant.h): metadata "tenant", the credential's, or
     * env->graph. The worker's store points at it while the handler runs. */
    char tenant[65];
    /* Who called, as events record it: "credential:<id>", "env:operator", "env:viewer",
     * "env:admin", or "" without a credential. Never a secret. */
    char caller[64];
    /* A stored credential's id ("" for the environment tokens). */
    char credential_id[17];
    /* For ROLE_HOST: the actors the credential acts for (owned by the call's arena). */
    char **actors;
    size_t n_actors;
    /* The tenant's quotas (0: unlimited), as the registry reported them for this call. */
    unsigned long long max_runs;
    unsigned long long max_artifacts;
} call;

/* A handler: in is the unpacked request (owned by dispatch). On success it sets *out to a
 * response message built in the call's arena and returns RPC_OK; otherwise it returns
 * call_fail(...). */
typedef int (*call_handler)(call *c, const ProtobufCMessage *in, ProtobufCMessage **out);

/* Zeroed memory of size bytes that lives until call_release, or NULL. */
void *call_alloc(call *c, size_t size);
/* Copy of s (NULL gives NULL) that lives until call_release; NULL also on failure. */
char *call_strdup(call *c, const char *s);
/* Frees every block of the arena. */
void call_release(call *c);

/* Long waits (WaitRun, grpc Health/Watch, a CreateRun that waits for its run to end) may hold
 * at most half of the workers at once (none when there is only one), so callers that wait
 * never starve the ones that act. Returns the milliseconds this call may wait: want_ms when a
 * slot is free (the call holds it until call_wait_end or call_release), 0 when none is (the
 * handler then answers what is true now, as a wait that timed out would). */
int call_wait_begin(call *c, int want_ms);
/* Gives the call's slot back (nothing when it holds none). */
void call_wait_end(call *c);

/* Records status and a printf-style message for the reply; returns status. */
int call_fail(call *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The one place a domain status (status.h) becomes an RPC status: records the RPC_* code of
 * status with a message naming what failed (what, e.g. "run r1"; NULL: "object") and returns
 * that code. Every handler that fails on a STATUS_E* code goes through here. */
int call_fail_status(call *c, int status, const char *what);

/* call_fail_status with the handler's own words for the message (printf-style); the code is
 * still call_fail_status's. */
int call_fail_statusf(call *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* call_fail_status with what and id joined ("run", "r1": "run r1 not found"), so every message
 * names the object the caller asked for. id may be NULL or empty (then what alone). */
int call_fail_status_id(call *c, int status, const char *what, const char *id);

/* call_fail_status_id for a run: a run the database does not have but that was archived is
 * NOT_FOUND naming its archive ("run r1 was archived to <graph>/<day>/r1.charter-archive
 * (...)"), found from the entry the database keeps for the invocation window or, after it,
 * from the index of charterd's archive folder (archive_lookup.h archive_name_run). */
int call_fail_run(call *c, int status, const char *run_id);

/* The gate environment of an RPC: its worker's store, the startup workflow and the limits. */
gate_env call_gate_env(const call *c);

/* RPC_OK, or RPC_INVALID_ARGUMENT naming field when value is not an id (ids_graph_ok). */
int call_require_id(call *c, const char *field, const char *value);

/* RPC_OK, or RPC_INVALID_ARGUMENT naming field when value (a proto3 string, which protobuf-c
 * does not check) is not valid UTF-8: text that is stored and returned must be. */
int call_require_utf8(call *c, const char *field, const char *value);

#endif
