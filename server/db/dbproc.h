/*
 * dbproc.h - the embedded database: a redis-server child in charterd's data folder.
 *
 * Without --redis, charterd runs its own redis-server listening only on a unix socket in the
 * data folder (no TCP port, socket mode 0700, append-only file on, no RDB snapshots) and stops
 * it on exit. The child runs in its own process group, so a Ctrl-C aimed at charterd does not
 * stop the database under calls still in flight, and it receives SIGTERM if charterd dies
 * without stopping it (Linux parent-death signal).
 */
#ifndef CHARTER_DBPROC_H
#define CHARTER_DBPROC_H

#include <stddef.h>
#include <sys/types.h>

typedef struct dbproc dbproc;

/* Starts redis-server (found on PATH) in data_dir, which must exist with mode 0700, and waits
 * until it answers PING, at most wait_ms milliseconds. A stale redis.sock left by a crash is
 * removed; one a live server answers on is refused. On success *out owns the child (stop it
 * with dbproc_stop). On failure returns -1 with one line "<what is wrong> (<how to fix>)" in
 * err (errlen bytes) and no child is left running. */
int dbproc_start(const char *data_dir, int wait_ms, dbproc **out, char *err, size_t errlen);

/* "unix://<data_dir>/redis.sock"; valid until dbproc_stop. */
const char *dbproc_url(const dbproc *p);

/* The child's process id (0 once it has been reaped). */
pid_t dbproc_pid(const dbproc *p);

/* Reaps the child without blocking. Returns 1 the first time it is found dead, with how it
 * ended in what (e.g. "exited with status 1", "killed by signal 9"); 0 while it runs or after
 * it was already reported. */
int dbproc_check(dbproc *p, char *what, size_t n);

/* Stops the child (SIGTERM, then SIGKILL if it has not exited after 10 s), reaps it and frees
 * p. Safe with NULL and after the child died. */
void dbproc_stop(dbproc *p);

#endif
