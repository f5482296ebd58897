/*
 * bench_echo_proc.c - the echo server (bench_echo.c) in a process of its own, as charterd is
 * one: the ceiling a server process can reach, not one that shares the load's process, its
 * NNG threads and its scheduling. charter-bench starts itself as
 *
 *   charter-bench --echo-server URL SLOTS WORKERS [REDIS_URL]
 *
 * with a pipe on each of its standard input and output. The child starts the server and
 * writes "ready" (or "error <why>"); it serves until its standard input ends (the parent
 * closed it, or the parent died), then stops, writes "failures <n>" (the no-op FCALLs that
 * failed) and exits. That is its only way to stop: the ^C or SIGTERM that reaches the whole
 * process group (a terminal, timeout(1), a service manager) interrupts the parent, which then
 * stops the child and still reads its count.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

extern char **environ;

struct bench_echo_proc {
    pid_t pid;
    FILE *to;   /* the child's standard input: closed to stop it */
    FILE *from; /* the child's standard output: its "ready" and "failures" lines */
};

int echo_server_main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        printf("error usage: charter-bench --echo-server URL SLOTS WORKERS [REDIS_URL]\n");
        return 2;
    }
    /* Digits only (strtoul took "" as 0 and " 4" as 4), and a worker at least for the FCALLs:
     * with none the echo-fcall ceiling would call Redis no time at all. */
    const char *redis = argc == 4 ? argv[3] : NULL;
    unsigned long slots = 0, workers = 0;
    if (parse_ulong(argv[1], 1, 4096, &slots) != 0 ||
        parse_ulong(argv[2], redis != NULL ? 1 : 0, 4096, &workers) != 0) {
        printf("error SLOTS and WORKERS must be counts (1..4096, 0..4096; 1..4096 with "
               "REDIS_URL)\n");
        return 2;
    }
    if (redis != NULL && !(strncmp(redis, "unix:///", 8) == 0 ||
                           (strncmp(redis, "tcp://", 6) == 0 && redis[6] != '\0'))) {
        printf("error REDIS_URL must be unix:///path or tcp://host:port\n");
        return 2;
    }
    /* A signal to the whole group is the parent's to handle: dying of it here would lose the
     * count, and the parent would report the ceiling as failed. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    char err[400];
    bench_echo *e = NULL;
    if (echo_start(argv[0], (unsigned)slots, (unsigned)workers, redis, &e, err, sizeof err) != 0) {
        printf("error %s\n", err);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    while (fread(buf, 1, sizeof buf, stdin) > 0) {
    }
    printf("failures %lu\n", echo_stop(e));
    fflush(stdout);
    return 0;
}

/* One line from the child into line (empty when none came). The parent's SIGINT and SIGTERM
 * handler does not restart reads, so a read the signal interrupted is made again: the child
 * still answers. NULL when the child exited without the line. */
static char *proc_line(bench_echo_proc *p, char *line, size_t n)
{
    line[0] = '\0';
    for (;;) {
        errno = 0;
        if (fgets(line, (int)n, p->from) != NULL)
            return line;
        if (!ferror(p->from) || errno != EINTR)
            return NULL;
        clearerr(p->from);
    }
}

/* Reaps the child and frees p. */
static void proc_free(bench_echo_proc *p)
{
    if (p->to != NULL)
        fclose(p->to);
    if (p->from != NULL)
        fclose(p->from);
    if (p->pid > 0) {
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    free(p);
}

int echo_proc_start(const char *url, unsigned slots, unsigned workers, const char *redis_url,
                    bench_echo_proc **out, char *err, size_t errlen)
{
    *out = NULL;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        snprintf(err, errlen, "echo: cannot find this program (/proc/self/exe): %s",
                 strerror(errno));
        return -1;
    }
    self[n] = '\0';
    bench_echo_proc *p = calloc(1, sizeof *p);
    int in[2] = {-1, -1}, outp[2] = {-1, -1};
    if (p == NULL || pipe2(in, O_CLOEXEC) != 0 || pipe2(outp, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "echo: cannot make the server's pipes: %s", strerror(errno));
        for (int i = 0; i < 2; i++) {
            if (in[i] >= 0)
                close(in[i]);
            if (outp[i] >= 0)
                close(outp[i]);
        }
        free(p);
        return -1;
    }
    char s_slots[16], s_workers[16];
    snprintf(s_slots, sizeof s_slots, "%u", slots);
    snprintf(s_workers, sizeof s_workers, "%u", workers);
    char *argv[] = {self,      "--echo-server",   (char *)url, s_slots,
                    s_workers, (char *)redis_url, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
    int rv = posix_spawn(&p->pid, self, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(outp[1]);
    p->to = fdopen(in[1], "w");
    p->from = fdopen(outp[0], "r");
    if (rv != 0 || p->to == NULL || p->from == NULL) {
        snprintf(err, errlen, "echo: cannot start %s --echo-server: %s", self, strerror(rv));
        if (p->to == NULL)
            close(in[1]);
        if (p->from == NULL)
            close(outp[0]);
        if (rv != 0)
            p->pid = 0;
        proc_free(p);
        return -1;
    }
    char line[512];
    if (proc_line(p, line, sizeof line) == NULL || strcmp(line, "ready\n") != 0) {
        line[strcspn(line, "\n")] = '\0';
        snprintf(err, errlen, "echo: the server process did not start: %s",
                 strncmp(line, "error ", 6) == 0 ? line + 6 : "it exited");
        proc_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

long echo_proc_pid(const bench_echo_proc *p)
{
    return (long)p->pid;
}

unsigned long echo_proc_stop(bench_echo_proc *p, bool *died)
{
    if (died != NULL)
        *died = false;
    if (p == NULL)
        return 0;
    fclose(p->to);
    p->to = NULL;
    unsigned long failures = 0;
    char line[64];
    if (proc_line(p, line, sizeof line) == NULL || sscanf(line, "failures %lu", &failures) != 1) {
        failures = 0; /* it died before its count: the report says so, and not as an FCALL */
        if (died != NULL)
            *died = true;
    }
    proc_free(p);
    return failures;
}
