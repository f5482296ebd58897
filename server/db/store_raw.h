/*
 * store_raw.h - the raw call of a query function by its name string, private to the database
 * layer.
 *
 * Only server/db/store.c, the typed stubs generated from the function headers (build/gen/queries.c,
 * queries/stubs.pl) and tests that call a function with malformed arguments on purpose include
 * this header; every other caller uses the stubs of queries.h, whose prototypes the compiler
 * checks and whose table charterd compares with FUNCTION LIST at startup. tests/layers.sh fails
 * when another file includes it.
 */
#ifndef CHARTER_STORE_RAW_H
#define CHARTER_STORE_RAW_H

#include <jansson.h>

/* As store.h declares them (store_raw.h includes no header of server/, so the store module and
 * this one form no include cycle). */
typedef struct store store;
typedef struct store_list store_list;

/* The most arguments one call passes after its key. */
#define STORE_CALL_MAX_ARGS 32

/* Calls query function fn (without the "charter_" prefix, e.g. "get_run") with the graph's key
 * prefix as its only key and nargs (0..STORE_CALL_MAX_ARGS) NUL-terminated string arguments. On
 * success *out (may be NULL to discard) is the decoded JSON object (caller frees with
 * json_decref), or NULL for a nil reply; on any failure *out is NULL. A reply {"err":
 * "not_found"|...} maps to the matching STATUS_E* code (not_found ENOTFOUND, exists EEXISTS,
 * refused EREFUSED, invalid EINVAL, limit ELIMIT) with its msg in store_last_error. A Redis error
 * reply is STATUS_EUNAVAILABLE when transient (LOADING, BUSY, READONLY, ...: the command did not
 * run), else STATUS_EPROTO. "Function not found" means the function did not run: when Redis
 * holds no query library (restarted empty, its functions flushed) the library store_load_library
 * last loaded is loaded again (logged) and the call sent again once; when it holds a library of
 * another version, that library is left alone and the call is STATUS_EUNAVAILABLE (nothing
 * written) naming both versions. An I/O error or timeout drops the connection (the next call
 * reconnects) and is STATUS_EUNAVAILABLE: the effect is unknown. A bad name, a NULL argument or
 * nargs out of range is STATUS_EINVAL (nothing sent). This is the one place where FCALL is
 * issued. */
int store_call(store *st, const char *fn, int nargs, const char *const *args, json_t **out);

/* store_call for a function that replies either a JSON text (*out, as store_call, with the
 * same error mapping) or a flat array of strings and nils (*list: free with store_list_free).
 * On STATUS_OK exactly one of *out and *list is set (or neither, for a nil reply). An array
 * holding anything else is STATUS_EPROTO. */
int store_call_list(store *st, const char *fn, int nargs, const char *const *args, json_t **out,
                    store_list **list);

/* store_call with one argument that is a JSON document (encoded compactly). */
int store_call_json(store *st, const char *fn, const json_t *arg, json_t **out);

/* store_call with the prefix of graph as the key (a function of another graph, such as the
 * tenant registry), then points st back at the graph it addressed (store_use_graph). Same
 * returns as store_call; STATUS_EINVAL for a bad graph name (nothing sent). */
int store_call_on(store *st, const char *graph, const char *fn, int nargs, const char *const *args,
                  json_t **out);

#endif
