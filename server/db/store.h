/*
 * store.h - charterd's only way to the database.
 *
 * A store is one hiredis context bound to one graph (every key carries the hash tag {graph}).
 * Every read and write is an FCALL of a function of the query library (queries/, built into one),
 * made by that function's typed stub (queries.h, generated from the function headers; included
 * at the end); no graph key is named in C. Functions reply with one JSON document (Redis cjson),
 * which the store parses with jansson.
 *
 * A store is used by one thread at a time (each worker owns one). A command that fails on I/O
 * or times out leaves a synchronous hiredis context unusable (a late reply would be read as the
 * answer to the next command), so the store drops the context and reconnects on the next call;
 * the effect of the failed command is unknown (STATUS_EUNAVAILABLE), which is why the delivery
 * protocol looks an invocation up again before retrying a commit. hiredis writes with write(2),
 * so the process must ignore SIGPIPE: a write to a connection the server closed then fails
 * with EPIPE (STATUS_EUNAVAILABLE) instead of ending the process.
 */
#ifndef CHARTER_STORE_H
#define CHARTER_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "policy/facts.h"
#include "policy/guard.h"

/* The query library's version; charterd refuses to start when the loaded library reports
 * another. Bump it with every change to the library's sources in queries/. */
#define STORE_LIBRARY_VERSION "27"

/* The largest seq the query library numbers or accepts (check_count's 10^15 in queries/): a
 * run's events never go beyond it. */
#define STORE_MAX_SEQ 1000000000000000ULL

#include "core/status.h"

typedef struct store store;

/* Connects to url ("unix:///path/redis.sock" or "tcp://host:port", host may be "[v6addr]") for
 * graph. timeout_ms bounds connecting and each command until store_set_timeout changes it
 * (<= 0 selects 5000 ms); a reconnect is bounded by the current timeout. The connection is
 * named "charter.<graph>" (CLIENT SETNAME) so CLIENT LIST shows whose it is. On success *out
 * owns a new store (free with store_close). The graph name is 1..64 characters of
 * [A-Za-z0-9_.-]. Returns STATUS_OK, STATUS_EINVAL (bad url or graph), STATUS_EUNAVAILABLE,
 * STATUS_ENOMEM.
 *
 * With "cluster://host:port[,...]" the store learns the slot map (CLUSTER SLOTS) from the first
 * seed that answers and sends each call to the master owning the slot of the current graph's
 * hash tag (CLUSTER KEYSLOT, cached per graph), with one connection per master it has talked
 * to. A MOVED reply updates the map and the command is sent again on the named node; an ASK
 * reply sends ASKING and the command once on the named node (a redirect means the command did
 * not run). The map is learnt again after a MOVED and after a connection failure. Deadlines
 * and effect-unknown are as on one server: a command sent and not answered is effect-unknown. */
int store_open(const char *url, const char *graph, int timeout_ms, store **out);

/* Largest canonical Redis URL, with its NUL: "unix://" and a unix socket path of 107 bytes,
 * "tcp://" and a host of 255 bytes with its port, or "cluster://" and up to 16 seeds. */
#define STORE_URL_MAX 1024

/* Writes the canonical form of a Redis URL to out (outlen bytes, at least STORE_URL_MAX):
 * "unix:///path" for unix:///path, unix:/path, redis+unix:///path and redis+unix:/path;
 * "tcp://host:port" for tcp://host:port and redis://host[:port][/0] (port 6379 when left out).
 * The forms users copy from Redis clients are accepted so the one they have works as given.
 * "cluster://host:port[,host:port...]" (1..16 seeds of a Redis Cluster, each with its port) is
 * kept as given.
 * Returns STATUS_OK, or STATUS_EINVAL for anything else (credentials, TLS, another database
 * number, a relative socket path). */
int store_url_canonical(const char *url, char *out, size_t outlen);
/* Points the following calls at another graph (a tenant): every FCALL's key becomes
 * "charter:{<graph>}". The connection stays (on a cluster, the store follows the graph's slot).
 * graph follows store_open's rule. Returns STATUS_OK or STATUS_EINVAL (nothing changed). */
int store_use_graph(store *st, const char *graph);

/* The graph the following calls address (store_open's, or the last store_use_graph's). */
const char *store_graph(const store *st);

/* True when st talks to a Redis Cluster (a cluster:// URL). */
bool store_is_cluster(const store *st);

/* Closes the connection and frees st (NULL is ignored). */
void store_close(store *st);

/* The per-command timeout in milliseconds for the following calls, with no deadline (for
 * work outside an RPC); <= 0 selects 5000 ms. */
void store_set_timeout(store *st, int timeout_ms);

/* The deadline of one RPC: timeout_ms milliseconds from now (<= 0 selects 5000 ms) bound the
 * whole call, so every following command (and a reconnect) gets only what remains of it, and
 * once it has passed a command is not sent and fails with STATUS_EUNAVAILABLE. Lasts until the
 * next store_set_deadline or store_set_timeout. */
void store_set_deadline(store *st, int timeout_ms);

/* True when, since the last store_set_deadline, a command failed because the deadline passed
 * (not sent, or timed out at the deadline): the caller answers DEADLINE_EXCEEDED. */
bool store_deadline_passed(const store *st);

/* Milliseconds left of the call's deadline (0 once passed), or the per-command timeout when no
 * deadline is set. */
int store_remaining_ms(const store *st);

/* Holds reserve_ms milliseconds of the deadline back from the following commands (and
 * reconnects): each gets what remains minus the reserve, and is not sent once nothing beyond
 * it is left. 0 releases it; store_set_deadline and store_set_timeout release it too. Used to
 * keep time for a lookup after a command whose outcome may be unknown. */
void store_set_reserve(store *st, int reserve_ms);

/* True when the last query call (a stub of queries.h) failed after its command was written to
 * Redis with no reply read (an I/O error or timeout): the command may have run, or may still
 * run later (a command queued in a paused server's socket runs once it resumes). False after
 * a success, a failure before sending (deadline passed, no connection) or an error reply. */
bool store_effect_unknown(const store *st);

/* The number of query calls (FCALL commands, each round trip to Redis one) this store has
 * sent since it was opened, whatever their outcome. */
unsigned long long store_calls(const store *st);

/* Notes ts, a time "<seconds>.<6 digits>" the database read from its own clock (TIME) in a
 * reply of this store's connection: store_db_time counts on from it. Anything else, or a time
 * before the one noted, is ignored. */
void store_note_time(store *st, const char *ts);

/* The database's clock as this store last noted it (store_note_time), moved on by the
 * CLOCK_MONOTONIC time elapsed since, into ts (32 bytes, "<seconds>.<6 digits>") and *now
 * (seconds since the epoch, as strtod reads ts). The noted time was read before its reply
 * arrived, so this is at or a little before the database's own time; a commit that was
 * decided at it checks that on its clock (RULE-COMMIT-DATABASE-CLOCK). Returns false, writing
 * nothing, when no time has been noted. */
bool store_db_time(const store *st, char ts[32], double *now);

/* A one-line description of the last failure (never contains secrets); valid until the next
 * call on st. */
const char *store_last_error(const store *st);

/* Records why a reply that decoded fine is still not to be trusted (e.g. a stored definition
 * that does not match its digest), printf-style, as the store's last error: the caller that
 * maps the STATUS_EPROTO it returns to an answer then names the mismatch. */
void store_note_error(store *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* FUNCTION LOAD REPLACE the library source (len bytes), then FCALL charter_version and compare
 * with STORE_LIBRARY_VERSION. On a cluster, on every master of the slot map. On success the
 * process keeps a copy of source: any store of the process loads it again, without REPLACE,
 * into a Redis (or cluster master) found to hold no library (store_call in store_raw.h).
 * Returns STATUS_OK, STATUS_EUNAVAILABLE, STATUS_EPROTO (load failed or version differs;
 * store_last_error says which), STATUS_ENOMEM (loaded, but not kept).
 */
int store_load_library(store *st, const char *source, size_t len);

/* WAIT replicas: blocks until replicas replicas of the current connection's node (the one the
 * last call ran on) confirm every write sent on it, or until half of what remains of the
 * budget has passed (so the count is read and the call still answered in time). When fewer
 * replicas are connected (ROLE), nothing waits. *confirmed is how many did (0 when
 * replicas <= 0: nothing is asked, or fewer are connected). Returns STATUS_OK (compare *confirmed
 * with replicas), STATUS_EUNAVAILABLE (no connection, deadline passed, or I/O failure: nothing is
 * known of the replicas; the write itself is unaffected) or STATUS_EPROTO. */
int store_wait_replicas(store *st, int replicas, int *confirmed);

/* Whether Redis has the module name loaded (MODULE LIST; RediSearch 1.x is "ft"): *loaded.
 * Returns STATUS_OK, STATUS_EUNAVAILABLE or STATUS_EPROTO. */
int store_module_loaded(store *st, const char *name, bool *loaded);

/* The database's used_memory (INFO memory) in bytes into *bytes (-1 when not read). Returns
 * STATUS_OK, STATUS_EUNAVAILABLE or STATUS_EPROTO. */
int store_used_memory(store *st, long long *bytes);

/* STATUS_OK when Redis answers and the library answers with the expected version (a missing
 * library is loaded again first, as store_call does). STATUS_EPROTO when Redis answers without
 * it: another version, or a missing library that could not be loaded. */
int store_ping(store *st);

/* A reply that is a flat array of strings and nils (hiredis stays inside store.c): what the
 * stub of a function whose call line says "-> list" sets (queries.h). */
typedef struct store_list store_list;

/* The number of elements of list. */
size_t store_list_size(const store_list *list);
/* Element i (< store_list_size) of list, borrowed until store_list_free, or NULL for a nil; *len
 * (may be NULL) its length in bytes (0 for a nil). */
const char *store_list_get(const store_list *list, size_t i, size_t *len);
/* Frees list (NULL is ignored). */
void store_list_free(store_list *list);

/* Compares the functions of the loaded library (FUNCTION LIST LIBRARYNAME charter) with the
 * table the typed stubs were generated with (queries_functions, from registry.lua): every
 * function there, none more, each with the same no-writes flag. Call it after
 * store_load_library; charterd refuses to start unless it passes, as the method table is
 * checked against the proto descriptors. On a cluster, on every master of the slot map. Returns
 * STATUS_OK; STATUS_EPROTO with store_last_error naming the first mismatch (in registry.lua's
 * order: a function missing or its flag differing; then one the stubs do not know) and what to
 * do; STATUS_EUNAVAILABLE. */
int store_check_functions(store *st);

/* --- facts for the guard: each result owned by the caller, decoded and freed as facts.h says
 * (facts_ancestry_free, facts_chain_free, facts_context_free). --- */

/* Every artifact reachable from payload_id through DERIVED_FROM (query "ancestry"), at most
 * limit artifacts (out->truncated set when reached). Returns STATUS_OK, STATUS_ENOTFOUND when the
 * payload does not exist, STATUS_EUNAVAILABLE, STATUS_EPROTO, STATUS_ENOMEM. */
int store_ancestry(store *st, const char *payload_id, size_t limit, guard_ancestry *out);

/* The leaf grant and every grant above it (query "grant_chain"). A missing leaf gives STATUS_OK
 * with out->n == 0 (the guard answers GRANT_NOT_FOUND). */
int store_grant_chain(store *st, const char *grant_id, guard_chain *out);

/* The context, its run, its step and its owners (query "context_owner"). STATUS_ENOTFOUND when
 * the context does not exist. */
int store_context(store *st, const char *context_id, guard_context *out);

/* The typed stubs of every query function (generated from the function headers in queries/): the
 * only way to call one. */
#include "queries.h"

#endif
