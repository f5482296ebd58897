/*
 * evlog.c - sealing and writing a run's event hash chain (see evlog.h).
 *
 * Every event writer of the query library takes its event sealed: seq, ts (database time),
 * prev and hash computed here from a head read just before. The writer stores the event only
 * if the head is unchanged and otherwise answers {"conflict":true,"head":{...}} with the head
 * it found, from which the event is sealed again without another read. The MAC that seals an
 * event under the integrity key is taken by integrity.c, which alone holds the key; the walk
 * that checks a chain lives in audit.c.
 */
#include "evidence/evlog.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "evidence/integrity.h"
#include "evidence/snapshot_resolve.h"
#include "db/lineage.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/invariant.h"

/* --- configuration ------------------------------------------------------------------------ */

static struct {
    char evaluator[65];
} evlog_cfg;

static bool evlog_hex64(const char *s)
{
    return s != NULL && strlen(s) == 64 && digest_is_hex(s, 64);
}

int evlog_configure(const char *evaluator)
{
    if (evaluator != NULL && !evlog_hex64(evaluator))
        return STATUS_EINVAL;
    snprintf(evlog_cfg.evaluator, sizeof evlog_cfg.evaluator, "%s",
             evaluator != NULL ? evaluator : "");
    return STATUS_OK;
}

bool evlog_keyed(void)
{
    return integrity_keyed();
}

const char *evlog_evaluator(void)
{
    return evlog_cfg.evaluator;
}

int evlog_claim_integrity(store *st, char *err, size_t errlen)
{
    char check[65] = "";
    const char *mode = evlog_keyed() ? "keyed" : "keyless";
    if (evlog_keyed() && integrity_key_check(check) != STATUS_OK) {
        snprintf(err, errlen,
                 "cannot compute the integrity key check (check the OpenSSL "
                 "installation)");
        return STATUS_EPROTO;
    }
    json_t *reply = NULL;
    int rc = q_integrity(st, mode, check, &reply);
    if (rc != STATUS_OK) {
        snprintf(err, errlen, "%s", store_last_error(st));
        return rc;
    }
    const char *had = json_string_value(json_object_get(reply, "mode"));
    const char *had_check = json_string_value(json_object_get(reply, "key_check"));
    rc = STATUS_OK;
    if (had == NULL || had_check == NULL) {
        snprintf(err, errlen, "charter_integrity answered without a mode");
        rc = STATUS_EPROTO;
    } else if (strcmp(had, mode) != 0) {
        snprintf(err, errlen,
                 strcmp(had, "keyed") == 0
                     ? "the graph's events and receipts are sealed with an integrity key, and "
                       "none was given (start charterd with the graph's key file: without "
                       "--no-integrity-key to use <data folder>/integrity.key, or with "
                       "--integrity-key FILE)"
                     : "the graph was created without an integrity key (add "
                       "--adopt-integrity-key to seal its events with this key from now on, "
                       "earlier ones staying verifiable as plain SHA-256; or start charterd "
                       "with --no-integrity-key)");
        rc = STATUS_EREFUSED;
    } else if (strlen(had_check) != strlen(check) ||
               CRYPTO_memcmp(had_check, check, strlen(check)) != 0) {
        snprintf(err, errlen,
                 "the integrity key is not the one the graph's events and receipts were sealed "
                 "with (start charterd with the graph's key file: --integrity-key FILE)");
        rc = STATUS_EREFUSED;
    }
    OPENSSL_cleanse(check, sizeof check);
    json_decref(reply);
    return rc;
}

/* --- canonical text and hashes ----------------------------------------------------------- */

int evlog_event_hash(const evlog_fields *f, char hex[65])
{
    return evlog_event_hash_as(f, evlog_keyed(), hex);
}

int evlog_event_hash_as(const evlog_fields *f, bool keyed, char hex[65])
{
    char *text = NULL;
    size_t len = 0;
    memset(hex, '0', 64);
    hex[64] = '\0';
    int rc = evlog_event_text(f, &text, &len);
    if (rc != STATUS_OK)
        return rc;
    if (keyed) {
        rc = integrity_mac(text, len, hex) == STATUS_OK ? STATUS_OK : STATUS_ENOMEM;
    } else {
        if (digest_sha256_hex(text, len, hex) != 0)
            rc = STATUS_ENOMEM;
    }
    free(text);
    return rc;
}

static char *evlog_text_of(const json_t *v)
{
    if (json_is_string(v))
        return strdup(json_string_value(v));
    return evlog_json_text(v);
}

static _Thread_local const char *evlog_request_id_now;
static _Thread_local const char *evlog_caller_now;

/* The text of an object detail with the thread's request id and caller put in (as
 * evlog_detail_with_request_id would at sealing, the same bytes), or NULL when memory ran out
 * or there is neither (*tagged false: the seal adds them, as for any other detail). */
static char *evlog_detail_tagged(const json_t *detail, bool *tagged)
{
    const char *id = evlog_request_id_now, *who = evlog_caller_now;
    bool has_id = id != NULL && id[0] != '\0', has_who = who != NULL && who[0] != '\0';
    *tagged = false;
    if (!json_is_object(detail) || (!has_id && !has_who))
        return evlog_text_of(detail);
    json_t *o = json_copy((json_t *)detail);
    char *text = NULL;
    if (o != NULL && (!has_id || json_object_set_new(o, "request_id", json_string(id)) == 0) &&
        (!has_who || json_object_set_new(o, "caller", json_string(who)) == 0))
        text = evlog_json_text(o);
    json_decref(o);
    *tagged = text != NULL;
    return text;
}

int evlog_owned_event(evlog_owned *o, const char *kind, const guard_decision *d,
                      const char *evaluator, const json_t *detail, const json_t *snapshot)
{
    memset(o, 0, sizeof *o);
    o->ev.kind = kind;
    if (d != NULL) {
        metrics_decision(kind, (int)d->outcome, d->codes);
        guard_codes_format(d->codes, o->codes, sizeof o->codes);
        o->ev.outcome = decision_outcome_name(d->outcome);
        o->ev.codes = o->codes;
        snprintf(o->evaluator, sizeof o->evaluator, "%s",
                 evaluator != NULL && *evaluator ? evaluator : evlog_evaluator());
        o->ev.evaluator = o->evaluator;
        if ((o->witness = strdup(d->witness != NULL ? d->witness : "")) == NULL)
            return STATUS_ENOMEM;
        o->ev.witness = o->witness;
    }
    if ((detail != NULL &&
         (o->detail = evlog_detail_tagged(detail, &o->ev.detail_tagged)) == NULL) ||
        (snapshot != NULL && (o->snapshot = evlog_text_of(snapshot)) == NULL)) {
        evlog_owned_free(o);
        return STATUS_ENOMEM;
    }
    o->ev.detail = o->detail;
    o->ev.snapshot = o->snapshot;
    return STATUS_OK;
}

void evlog_owned_free(evlog_owned *o)
{
    free(o->witness);
    free(o->detail);
    free(o->snapshot);
    memset(o, 0, sizeof *o);
}

/* --- per-run locks (throughput only; see evlog.h) ----------------------------------------- */

#define EVLOG_LOCKS 256
static pthread_mutex_t evlog_locks[EVLOG_LOCKS];
static pthread_once_t evlog_locks_once = PTHREAD_ONCE_INIT;
static bool evlog_locks_ok;

static void evlog_locks_init(void)
{
    evlog_locks_ok = true;
    for (int i = 0; i < EVLOG_LOCKS; i++)
        if (pthread_mutex_init(&evlog_locks[i], NULL) != 0)
            evlog_locks_ok = false;
}

/* The last event this process wrote to a run, for up to EVLOG_HINT_WAYS runs under each lock:
 * a hint only, read and written with the lock held. A head read before the lock was taken
 * (evlog_commit_delivery's, from the facts read) is often behind it when this process's
 * writers of one run queue on the lock; sealing on the hint instead spares the conflict round
 * trip. Several ways a lock, because runs share locks: with one, two busy runs under one lock
 * took each other's hint in turn and every other write of theirs cost a conflict (one
 * delivery in nine with 16 runs over 256 locks). The conditional write still decides: a wrong
 * hint costs one conflict reply, never a wrong link. */
#define EVLOG_HINT_WAYS 4
typedef struct {
    char run_id[160];
    uint64_t seq;
    char hash[65];
    char ts[32];
} evlog_hint;
static struct {
    evlog_hint way[EVLOG_HINT_WAYS];
    unsigned next; /* the way the next run without one takes */
} evlog_hints[EVLOG_LOCKS];

/* The lock of run_id, or NULL (then writers only rely on the conditional write). */
static pthread_mutex_t *evlog_lock_of(const char *run_id)
{
    if (pthread_once(&evlog_locks_once, evlog_locks_init) != 0 || !evlog_locks_ok)
        return NULL;
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)run_id; *p; p++)
        h = (h ^ *p) * 16777619u;
    return &evlog_locks[h % EVLOG_LOCKS];
}

/* The hint of run_id under lock (held): its way when this process wrote the run under it
 * lately, else the way a write of it replaces (the one replaced longest ago), which names
 * another run. NULL without a lock. */
static evlog_hint *evlog_hint_of(const pthread_mutex_t *lock, const char *run_id)
{
    if (lock == NULL)
        return NULL;
    size_t i = (size_t)(lock - evlog_locks);
    for (int k = 0; k < EVLOG_HINT_WAYS; k++)
        if (strcmp(evlog_hints[i].way[k].run_id, run_id) == 0)
            return &evlog_hints[i].way[k];
    evlog_hint *h = &evlog_hints[i].way[evlog_hints[i].next];
    evlog_hints[i].next = (evlog_hints[i].next + 1) % EVLOG_HINT_WAYS;
    return h;
}

/* Forgets the hint of run_id (an alternative event was written: its head is not known here),
 * leaving another run's that shares the way alone. Returns NULL, the hint to use from now. */
static evlog_hint *evlog_hint_forget(evlog_hint *hint, const char *run_id)
{
    if (hint != NULL && strcmp(hint->run_id, run_id) == 0)
        hint->run_id[0] = '\0';
    return NULL;
}

/* "<seconds>.<6 digits>" a is later than b. */
static bool evlog_later(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    return la != lb ? la > lb : strcmp(a, b) > 0;
}

/* --- reading ------------------------------------------------------------------------------ */

static void evlog_copy(char *dst, size_t n, const json_t *v)
{
    const char *s = json_string_value(v);
    snprintf(dst, n, "%s", s != NULL ? s : "");
}

/* Fills head from a charter_run_head reply (or a conflict reply's "head"). */
static int evlog_head_from(const json_t *j, evlog_head *head)
{
    memset(head, 0, sizeof *head);
    const json_t *seq = json_object_get(j, "seq");
    const json_t *now = json_object_get(j, "now");
    if (!json_is_object(j) || !json_is_integer(seq) || json_integer_value(seq) < 0 ||
        !json_is_string(now))
        return STATUS_EPROTO;
    head->exists = json_is_true(json_object_get(j, "exists"));
    head->seq = (uint64_t)json_integer_value(seq);
    evlog_copy(head->hash, sizeof head->hash, json_object_get(j, "hash"));
    evlog_copy(head->status, sizeof head->status, json_object_get(j, "status"));
    evlog_copy(head->now, sizeof head->now, now);
    evlog_copy(head->next_context, sizeof head->next_context, json_object_get(j, "next_context"));
    if (head->seq > 0 && !evlog_hex64(head->hash))
        return STATUS_EPROTO;
    return STATUS_OK;
}

int evlog_head_parse(const json_t *j, evlog_head *head)
{
    return evlog_head_from(j, head);
}

int evlog_read_head(store *st, const char *run_id, evlog_head *head)
{
    json_t *reply = NULL;
    memset(head, 0, sizeof *head);
    int rc = q_run_head(st, run_id, &reply);
    if (rc == STATUS_OK)
        rc = evlog_head_from(reply, head);
    json_decref(reply);
    return rc;
}

/* --- writing ------------------------------------------------------------------------------ */

/* Fits the event and arguments to the head about to be sealed on (a status change names the
 * status it leaves, a new context its id). Returns STATUS_OK or a failure that ends the write. */
typedef int (*evlog_adjust)(void *arg, const evlog_head *head, evlog_event *ev, const char **args);

/* A function whose reply may also be a flat list (a "-> list" stub): *list set instead of
 * *out. */
typedef int (*evlog_call_list)(store *st, int nargs, const char *const *args, json_t **out,
                               store_list **list);

typedef struct {
    evlog_call call;           /* the function's typed stub, through an adapter below */
    evlog_call_list call_list; /* or this one, when its reply may be a list */
    const char *run_id;
    const char *args[4]; /* the function's arguments before the event */
    int nargs;
    evlog_event ev;
    bool run_must_exist;
    const evlog_head *known; /* a head read already, or NULL to read it under the lock */
    evlog_adjust adjust;
    void *adjust_arg;
    /* Alternatives to ev (evlog_write_one_of), each sealed on the same head and passed after
     * it; the function stores at most one and says which. None when nalts is 0. */
    const evlog_event *alts;
    int nalts;
} evlog_write_spec;

#define EVLOG_MAX_ALTS 3

/* The functions that write a sealed event, each an adapter from the argument list the
 * seal-and-write loop builds (the function's arguments, then the sealed event) to its typed
 * stub; a count that is not the function's is a caller's mistake, refused. */
static int evlog_call_append_event(store *st, int nargs, const char *const *a, json_t **out)
{
    return nargs == 2 ? q_append_event(st, a[0], a[1], out) : STATUS_EINVAL;
}

static int evlog_call_create_run(store *st, int nargs, const char *const *a, json_t **out)
{
    return nargs == 2 ? q_create_run(st, a[0], a[1], out) : STATUS_EINVAL;
}

static int evlog_call_transition_run(store *st, int nargs, const char *const *a, json_t **out)
{
    return nargs == 4 ? q_transition_run(st, a[0], a[1], a[2], a[3], out) : STATUS_EINVAL;
}

static int evlog_call_request_recovery(store *st, int nargs, const char *const *a, json_t **out)
{
    return nargs == 2 ? q_request_recovery(st, a[0], a[1], out) : STATUS_EINVAL;
}

static int evlog_call_cancel_unclaimed(store *st, int nargs, const char *const *a, json_t **out)
{
    return nargs == 2 ? q_cancel_unclaimed(st, a[0], a[1], out) : STATUS_EINVAL;
}

static int evlog_call_complete_run(store *st, int nargs, const char *const *a, json_t **out)
{
    return nargs == 2 ? q_complete_run(st, a[0], a[1], out) : STATUS_EINVAL;
}

static int evlog_call_resume_run(store *st, int nargs, const char *const *a, json_t **out)
{
    return nargs == 5 ? q_resume_run(st, a[0], a[1], a[2], a[3], a[4], out) : STATUS_EINVAL;
}

static int evlog_call_open_context(store *st, int nargs, const char *const *a, json_t **out)
{
    return nargs == 2 ? q_open_context(st, a[0], a[1], out) : STATUS_EINVAL;
}

static int evlog_call_create_artifact(store *st, int nargs, const char *const *a, json_t **out)
{
    return nargs == 3 ? q_create_artifact(st, a[0], a[1], a[2], out) : STATUS_EINVAL;
}

static int evlog_call_commit_delivery(store *st, int nargs, const char *const *a, json_t **out,
                                      store_list **list)
{
    return nargs == 4 ? q_commit_delivery(st, a[0], a[1], a[2], a[3], out, list) : STATUS_EINVAL;
}

static int evlog_seal_event(const char *run_id, const evlog_event *ev, const evlog_head *head,
                            evlog_sealed *sealed, char **text);

void evlog_set_request_id(const char *request_id)
{
    evlog_request_id_now = request_id;
}

void evlog_set_caller(const char *caller)
{
    evlog_caller_now = caller;
}

/* detail with the thread's request id and caller on it (evlog_set_request_id,
 * evlog_set_caller), into *out (caller frees; NULL when there is none to add). A JSON object
 * detail gets "request_id" and "caller" members, any other text " (request_id <id>, caller
 * <caller>)" at its end, an empty one "request_id <id>, caller <caller>"; either part is left
 * out when unset. */
static int evlog_detail_with_request_id(const char *detail, char **out)
{
    const char *id = evlog_request_id_now;
    const char *who = evlog_caller_now;
    bool has_id = id != NULL && id[0] != '\0';
    bool has_who = who != NULL && who[0] != '\0';
    *out = NULL;
    if (!has_id && !has_who) {
        return STATUS_OK;
    }
    if (detail != NULL && detail[0] == '{') {
        json_t *o = json_loads(detail, JSON_REJECT_DUPLICATES, NULL);
        if (json_is_object(o)) {
            if ((!has_id || json_object_set_new(o, "request_id", json_string(id)) == 0) &&
                (!has_who || json_object_set_new(o, "caller", json_string(who)) == 0))
                *out = evlog_json_text(o);
            json_decref(o);
            return *out != NULL ? STATUS_OK : STATUS_ENOMEM;
        }
        json_decref(o);
    }
    char tail[320];
    snprintf(tail, sizeof tail, "%s%s%s%s%s", has_id ? "request_id " : "", has_id ? id : "",
             has_id && has_who ? ", " : "", has_who ? "caller " : "", has_who ? who : "");
    bool empty = detail == NULL || detail[0] == '\0';
    size_t n = (empty ? 0 : strlen(detail)) + strlen(tail) + sizeof " ()";
    if ((*out = malloc(n)) == NULL)
        return STATUS_ENOMEM;
    if (empty)
        snprintf(*out, n, "%s", tail);
    else
        snprintf(*out, n, "%s (%s)", detail, tail);
    return STATUS_OK;
}

/* The sealed event as the writing functions take it. *text is the JSON text, caller frees. */
static int evlog_seal(const char *run_id, const evlog_event *ev_in, const evlog_head *head,
                      evlog_sealed *sealed, char **text)
{
    char *detail = NULL;
    int drc =
        ev_in->detail_tagged ? STATUS_OK : evlog_detail_with_request_id(ev_in->detail, &detail);
    if (drc != STATUS_OK)
        return drc;
    evlog_event with_id = *ev_in;
    if (detail != NULL)
        with_id.detail = detail;
    int rc = evlog_seal_event(run_id, &with_id, head, sealed, text);
    free(detail);
    return rc;
}

static int evlog_seal_event(const char *run_id, const evlog_event *ev, const evlog_head *head,
                            evlog_sealed *sealed, char **text)
{
    char seq[24];
    sealed->seq = head->seq + 1;
    snprintf(seq, sizeof seq, "%llu", (unsigned long long)sealed->seq);
    snprintf(sealed->ts, sizeof sealed->ts, "%s", head->now);
    snprintf(sealed->prev, sizeof sealed->prev, "%s", head->seq > 0 ? head->hash : "");
    const char *evaluator = ev->evaluator != NULL ? ev->evaluator : "";
    evlog_fields f = {run_id,      seq,        sealed->ts,   ev->kind,  ev->outcome, ev->codes,
                      ev->witness, ev->detail, ev->snapshot, evaluator, sealed->prev};
    int rc = evlog_event_hash(&f, sealed->hash);
    if (rc != STATUS_OK)
        return rc;
#define EVLOG_S(x) ((x) != NULL ? (x) : "")
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s}", "kind",
                  EVLOG_S(ev->kind), "outcome", EVLOG_S(ev->outcome), "codes", EVLOG_S(ev->codes),
                  "witness", EVLOG_S(ev->witness), "detail", EVLOG_S(ev->detail), "snapshot",
                  EVLOG_S(ev->snapshot), "evaluator", evaluator, "seq", (json_int_t)sealed->seq,
                  "ts", sealed->ts, "prev", sealed->prev, "hash", sealed->hash);
#undef EVLOG_S
    if (j == NULL)
        return STATUS_ENOMEM;
    *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return *text != NULL ? STATUS_OK : STATUS_ENOMEM;
}

/* A snapshot larger than EVLOG_BLOB_MIN bytes is stored once, by content (charter_put_blob),
 * and the event carries {"blob":"<sha256>"} in its place: deciding again over the same facts
 * (the same artifact checked for the same step) costs the database a reference, not another
 * copy of a whole ancestry. The reference is what the event's hash covers, and it names the
 * SHA-256 of the blob, so the chain still commits to every byte of the facts. */
#define EVLOG_BLOB_MIN 4096
#define EVLOG_BLOB_REF SNAPSHOT_BLOB_REF
/* A snapshot whose repeating facts are a record stored once (evlog_facts_split): its text, as
 * evlog_json_text encodes it (keys sorted), opens with this. */
#define EVLOG_FACTS_KEY SNAPSHOT_FACTS_KEY
#define EVLOG_FACTS_REF SNAPSHOT_FACTS_REF

static int evlog_blob_out(store *st, const char *snapshot, char ref[96])
{
    char sha[65];
    if (digest_sha256_hex(snapshot, strlen(snapshot), sha) != 0)
        return STATUS_ENOMEM;
    json_t *r = NULL;
    int rc = q_blob_exists(st, sha, &r);
    bool have = rc == STATUS_OK && json_is_true(json_object_get(r, "exists"));
    json_decref(r);
    if (rc == STATUS_OK && !have) {
        r = NULL;
        rc = q_put_blob(st, sha, snapshot, &r);
        json_decref(r);
    }
    if (rc == STATUS_OK)
        snprintf(ref, 96, "%s%s\"}", EVLOG_BLOB_REF, sha);
    return rc;
}

int evlog_facts_split(const json_t *snap, char **record, char sha[65], json_t **ref)
{
    *record = NULL;
    *ref = NULL;
    sha[0] = '\0';
    if (!json_is_object(snap) || json_object_get(snap, "now") == NULL)
        return STATUS_EINVAL;
    json_t *facts = json_copy((json_t *)snap);
    if (facts == NULL || json_object_del(facts, "now") != 0) {
        json_decref(facts);
        return STATUS_ENOMEM;
    }
    *record = evlog_json_text(facts);
    json_decref(facts);
    if (*record == NULL || digest_sha256_hex(*record, strlen(*record), sha) != 0 ||
        (*ref = json_pack("{s:s, s:O}", EVLOG_FACTS_KEY, sha, "now",
                          json_object_get(snap, "now"))) == NULL) {
        free(*record);
        *record = NULL;
        sha[0] = '\0';
        return STATUS_ENOMEM;
    }
    return STATUS_OK;
}

bool evlog_snapshot_record(const char *snapshot, char key[72])
{
    key[0] = '\0';
    if (snapshot == NULL)
        return false;
    size_t bl = strlen(EVLOG_BLOB_REF), fl = strlen(EVLOG_FACTS_REF), len = strlen(snapshot);
    if (strncmp(snapshot, EVLOG_BLOB_REF, bl) == 0 && len == bl + 64 + 2 &&
        digest_is_hex(snapshot + bl, 64))
        snprintf(key, 72, "blob:%.64s", snapshot + bl);
    else if (strncmp(snapshot, EVLOG_FACTS_REF, fl) == 0 && len > fl + 64 &&
             digest_is_hex(snapshot + fl, 64) && snapshot[fl + 64] == '"')
        snprintf(key, 72, "facts:%.64s", snapshot + fl);
    return key[0] != '\0';
}

/* A blob's text from the graph (snapshot_source.blob; ctx the store). */
static int evlog_graph_blob(void *ctx, const char *sha, char **text)
{
    *text = NULL;
    json_t *r = NULL;
    int rc = q_get_blob(ctx, sha, &r);
    const char *stored = json_string_value(json_object_get(r, "text"));
    if (rc == STATUS_OK && stored == NULL)
        rc = STATUS_ENOTFOUND;
    else if (rc == STATUS_OK && (*text = strdup(stored)) == NULL)
        rc = STATUS_ENOMEM;
    json_decref(r);
    return rc;
}

int evlog_snapshot_resolve(store *st, const char *snapshot, char **out, char *why, size_t n)
{
    snapshot_source src = {evlog_graph_blob, lineage_graph_records, st};
    return snapshot_resolve(&src, snapshot, out, why, n);
}

/* One sealed attempt: w's function called with its arguments and the event text (and the
 * alternatives sealed on the same head). *r and *list as the function answered. */
static int evlog_attempt(store *st, evlog_write_spec *w, const evlog_head *head,
                         evlog_sealed *sealed, json_t **r, store_list **list)
{
    evlog_event ev = w->ev;
    const char *args[5 + EVLOG_MAX_ALTS];
    memcpy(args, w->args, sizeof w->args);
    int rc = STATUS_OK;
    if (w->adjust != NULL && (rc = w->adjust(w->adjust_arg, head, &ev, args)) != STATUS_OK)
        return rc;
    char *text = NULL;
    if ((rc = evlog_seal(w->run_id, &ev, head, sealed, &text)) != STATUS_OK)
        return rc;
    args[w->nargs] = text;
    char *alt_text[EVLOG_MAX_ALTS] = {NULL};
    for (int a = 0; rc == STATUS_OK && a < w->nalts; a++) {
        evlog_sealed alt_sealed;
        rc = evlog_seal(w->run_id, &w->alts[a], head, &alt_sealed, &alt_text[a]);
        args[w->nargs + 1 + a] = alt_text[a];
    }
    if (rc == STATUS_OK && w->call_list != NULL)
        rc = w->call_list(st, w->nargs + 1 + w->nalts, args, r, list);
    else if (rc == STATUS_OK)
        rc = w->call(st, w->nargs + 1 + w->nalts, args, r);
    free(text);
    for (int a = 0; a < w->nalts; a++)
        free(alt_text[a]);
    return rc;
}

/* Remembers under the run's lock the event just written, the head this process's next writer
 * of the run seals on. */
static void evlog_hint_set(evlog_hint *hint, const char *run_id, const evlog_sealed *sealed)
{
    if (hint == NULL || strlen(run_id) >= sizeof hint->run_id)
        return;
    snprintf(hint->run_id, sizeof hint->run_id, "%s", run_id);
    hint->seq = sealed->seq;
    snprintf(hint->hash, sizeof hint->hash, "%s", sealed->hash);
    snprintf(hint->ts, sizeof hint->ts, "%s", sealed->ts);
}

/* The seal-and-write loop (evlog.h). *reply (may be NULL) is the function's reply; with
 * w->call_list, *list (not NULL then) is its reply when that was a flat list. */
static int evlog_write(store *st, evlog_write_spec *w, json_t **reply, store_list **list,
                       evlog_sealed *sealed)
{
    evlog_sealed local;
    if (sealed == NULL)
        sealed = &local;
    memset(sealed, 0, sizeof *sealed);
    if (reply != NULL)
        *reply = NULL;
    if (w->run_id == NULL || *w->run_id == '\0')
        return STATUS_EINVAL;
    pthread_mutex_t *lock = evlog_lock_of(w->run_id);
    if (lock != NULL && pthread_mutex_lock(lock) != 0)
        lock = NULL;

    char blob_ref[96];
    int rc = STATUS_OK;
    if (w->ev.snapshot != NULL && strlen(w->ev.snapshot) > EVLOG_BLOB_MIN) {
        rc = evlog_blob_out(st, w->ev.snapshot, blob_ref);
        w->ev.snapshot = blob_ref;
    }
    evlog_head head;
    evlog_hint *hint = evlog_hint_of(lock, w->run_id);
    if (rc == STATUS_OK && w->known != NULL) {
        head = *w->known;
        if (hint != NULL && strcmp(hint->run_id, w->run_id) == 0 && hint->seq > head.seq) {
            head.seq = hint->seq;
            snprintf(head.hash, sizeof head.hash, "%s", hint->hash);
            if (evlog_later(hint->ts, head.now))
                snprintf(head.now, sizeof head.now, "%s", hint->ts);
        }
    } else if (rc == STATUS_OK) {
        rc = evlog_read_head(st, w->run_id, &head);
    }
    if (rc == STATUS_OK && w->run_must_exist && !head.exists)
        rc = STATUS_ENOTFOUND;
    bool written = false;
    for (int attempt = 0; rc == STATUS_OK && attempt < EVLOG_ATTEMPTS; attempt++) {
        json_t *r = NULL;
        store_list *l = NULL;
        rc = evlog_attempt(st, w, &head, sealed, &r, &l);
        if (rc == STATUS_OK && l != NULL) {
            /* A list reply is a write reported in the function's compact form (its seq second). */
            const char *wseq = store_list_size(l) > 1 ? store_list_get(l, 1, NULL) : NULL;
            INVARIANT(wseq != NULL && strtoull(wseq, NULL, 10) == sealed->seq);
            written = true;
            evlog_hint_set(hint, w->run_id, sealed);
            *list = l;
            break;
        }
        /* An alternative was written: this process's hint of the head is not known here. */
        if (rc == STATUS_OK && json_integer_value(json_object_get(r, "event_index")) > 0)
            hint = evlog_hint_forget(hint, w->run_id);
        if (rc != STATUS_OK) {
            json_decref(r);
            break;
        }
        if (!json_is_true(json_object_get(r, "conflict"))) {
            written = true;
            /* The database writes an event only at the head it was sealed on (seq - 1, prev):
             * a write it reports at another sequence number would break the chain. */
            const json_t *wseq = json_object_get(r, "seq");
            INVARIANT(!json_is_integer(wseq) || (uint64_t)json_integer_value(wseq) == sealed->seq);
            /* A commit refused, or answered by an existing delivery, wrote no event. */
            const char *status = json_string_value(json_object_get(r, "status"));
            if (status == NULL || (strcmp(status, "refused") != 0 && strcmp(status, "exists") != 0))
                evlog_hint_set(hint, w->run_id, sealed);
            if (reply != NULL)
                *reply = r;
            else
                json_decref(r);
            break;
        }
        /* Sealed again at once: the writer that moved the head has made progress, and waiting
         * would only let the next one of its process overtake this one again. */
        rc = evlog_head_from(json_object_get(r, "head"), &head);
        json_decref(r);
    }
    if (rc == STATUS_OK && !written) {
        rc = STATUS_EUNAVAILABLE; /* the head kept moving: fail closed */
        log_error("event %s of run %s not written: its head moved %d times in a row",
                  w->ev.kind ? w->ev.kind : "?", w->run_id, EVLOG_ATTEMPTS);
    } else if (rc != STATUS_OK && rc != STATUS_ENOTFOUND && rc != STATUS_EEXISTS) {
        log_error("event %s of run %s not written: %s", w->ev.kind ? w->ev.kind : "?", w->run_id,
                  store_last_error(st));
    }
    if (lock != NULL)
        pthread_mutex_unlock(lock);
    if (rc != STATUS_OK)
        memset(sealed, 0, sizeof *sealed);
    return rc;
}

int evlog_append(store *st, const char *run_id, const evlog_event *ev, evlog_sealed *sealed)
{
    evlog_write_spec w = {
        .call = evlog_call_append_event,
        .run_id = run_id,
        .args = {run_id},
        .nargs = 1,
        .ev = *ev,
        .run_must_exist = true,
    };
    return evlog_write(st, &w, NULL, NULL, sealed);
}

int evlog_write_one_of(store *st, evlog_call call, const char *run_id, const char *arg,
                       const evlog_event *evs, int nevs, json_t **reply)
{
    if (nevs < 1 || nevs > 1 + EVLOG_MAX_ALTS || arg == NULL || call == NULL)
        return STATUS_EINVAL;
    for (int a = 1; a < nevs; a++)
        if (evs[a].snapshot != NULL && strlen(evs[a].snapshot) > EVLOG_BLOB_MIN)
            return STATUS_EINVAL; /* only the first event's snapshot goes to a blob */
    evlog_write_spec w = {
        .call = call,
        .run_id = run_id,
        .args = {arg},
        .nargs = 1,
        .ev = evs[0],
        .run_must_exist = true,
        .alts = evs + 1,
        .nalts = nevs - 1,
    };
    return evlog_write(st, &w, reply, NULL, NULL);
}

int evlog_create_run(store *st, const json_t *run_doc, json_t **reply)
{
    const char *id = json_string_value(json_object_get(run_doc, "id"));
    const char *mode = json_string_value(json_object_get(run_doc, "mode"));
    char detail[96];
    snprintf(detail, sizeof detail, "mode %.80s", mode != NULL ? mode : "");
    char *doc = evlog_json_text(run_doc);
    if (doc == NULL)
        return STATUS_ENOMEM;
    evlog_write_spec w = {
        .call = evlog_call_create_run,
        .run_id = id,
        .args = {doc},
        .nargs = 1,
        .ev = {.kind = "run_created", .detail = detail},
    };
    int rc = evlog_write(st, &w, reply, NULL, NULL);
    free(doc);
    if (rc == STATUS_OK)
        metrics_run_status("created");
    return rc;
}

typedef struct {
    const char *to;
    const char *detail;
    char *text;
} evlog_transition_arg;

static int evlog_transition_adjust(void *arg, const evlog_head *head, evlog_event *ev,
                                   const char **args)
{
    evlog_transition_arg *t = arg;
    (void)args;
    free(t->text);
    size_t n = strlen(head->status) + strlen(t->to) + strlen(t->detail) + 16;
    if ((t->text = malloc(n)) == NULL)
        return STATUS_ENOMEM;
    snprintf(t->text, n, "%s -> %s%s%s", head->status, t->to, *t->detail ? ": " : "", t->detail);
    ev->detail = t->text;
    return STATUS_OK;
}

/* One status transition through call (charter_transition_run with args run_id, from, to, or
 * charter_request_recovery or charter_cancel_unclaimed with run_id alone, their statuses
 * fixed in the function): evlog_transition's contract. */
static int evlog_transition_by(store *st, evlog_call call, const char *run_id, const char *from,
                               const char *to, const char *detail, evlog_sealed *sealed,
                               char current[32])
{
    evlog_transition_arg t = {to, detail != NULL ? detail : "", NULL};
    bool fixed = call != evlog_call_transition_run;
    evlog_write_spec w = {
        .call = call,
        .run_id = run_id,
        .args = {run_id, fixed ? NULL : from, fixed ? NULL : to},
        .nargs = fixed ? 1 : 3,
        .ev = {.kind = "status_changed"},
        .run_must_exist = true,
        .adjust = evlog_transition_adjust,
        .adjust_arg = &t,
    };
    json_t *reply = NULL;
    int rc = evlog_write(st, &w, &reply, NULL, sealed);
    free(t.text);
    if (rc == STATUS_OK && !json_is_true(json_object_get(reply, "ok"))) {
        if (current != NULL)
            evlog_copy(current, 32, json_object_get(reply, "status"));
        if (sealed != NULL)
            memset(sealed, 0, sizeof *sealed);
        rc = STATUS_EREFUSED;
    }
    json_decref(reply);
    if (rc == STATUS_OK)
        metrics_run_status(to);
    return rc;
}

int evlog_transition(store *st, const char *run_id, const char *from, const char *to,
                     const char *detail, evlog_sealed *sealed, char current[32])
{
    return evlog_transition_by(st, evlog_call_transition_run, run_id, from, to, detail, sealed,
                               current);
}

int evlog_request_recovery(store *st, const char *run_id, const char *detail, evlog_sealed *sealed,
                           char current[32])
{
    return evlog_transition_by(st, evlog_call_request_recovery, run_id, "blocked,interrupted,error",
                               "recovering", detail, sealed, current);
}

int evlog_cancel_unclaimed(store *st, const char *run_id, const char *detail, evlog_sealed *sealed,
                           char current[32])
{
    return evlog_transition_by(st, evlog_call_cancel_unclaimed, run_id, "", "cancelled", detail,
                               sealed, current);
}

int evlog_complete_run(store *st, const char *run_id, const char *detail, json_t **reply)
{
    evlog_transition_arg t = {"completed", detail != NULL ? detail : "", NULL};
    evlog_write_spec w = {
        .call = evlog_call_complete_run,
        .run_id = run_id,
        .args = {run_id},
        .nargs = 1,
        .ev = {.kind = "status_changed"},
        .run_must_exist = true,
        .adjust = evlog_transition_adjust,
        .adjust_arg = &t,
    };
    int rc = evlog_write(st, &w, reply, NULL, NULL);
    free(t.text);
    if (rc == STATUS_OK && json_is_true(json_object_get(*reply, "ok")) &&
        !json_is_true(json_object_get(*reply, "unchanged")))
        metrics_run_status("completed");
    return rc;
}

int evlog_resume_run(store *st, const char *run_id, const char *checkpoint_id, const char *workflow,
                     const char *counters, const char *detail, json_t **reply)
{
    evlog_transition_arg t = {"queued", detail != NULL ? detail : "", NULL};
    evlog_write_spec w = {
        .call = evlog_call_resume_run,
        .run_id = run_id,
        .args = {run_id, checkpoint_id, workflow, counters},
        .nargs = 4,
        .ev = {.kind = "status_changed"},
        .run_must_exist = true,
        .adjust = evlog_transition_adjust,
        .adjust_arg = &t,
    };
    int rc = evlog_write(st, &w, reply, NULL, NULL);
    free(t.text);
    if (rc == STATUS_OK && json_is_true(json_object_get(*reply, "ok")))
        metrics_run_status("queued");
    return rc;
}

typedef struct {
    const char *run_id, *step, *actor;
    char *doc;
    char detail[512];
} evlog_context_arg;

static int evlog_context_adjust(void *arg, const evlog_head *head, evlog_event *ev,
                                const char **args)
{
    evlog_context_arg *c = arg;
    free(c->doc);
    json_t *j = json_pack("{s:s, s:s, s:s, s:s}", "run_id", c->run_id, "step", c->step, "actor",
                          c->actor, "id", head->next_context);
    c->doc = evlog_json_text(j);
    json_decref(j);
    if (c->doc == NULL)
        return STATUS_ENOMEM;
    snprintf(c->detail, sizeof c->detail, "step %s context %s actor %s", c->step,
             head->next_context, c->actor);
    ev->detail = c->detail;
    args[0] = c->doc;
    return STATUS_OK;
}

int evlog_open_context(store *st, const char *run_id, const char *step, const char *actor,
                       json_t **reply)
{
    evlog_context_arg c = {run_id, step, actor, NULL, ""};
    evlog_write_spec w = {
        .call = evlog_call_open_context,
        .run_id = run_id,
        .args = {NULL},
        .nargs = 1,
        .ev = {.kind = "step_opened"},
        .run_must_exist = true,
        .adjust = evlog_context_adjust,
        .adjust_arg = &c,
    };
    int rc = evlog_write(st, &w, reply, NULL, NULL);
    free(c.doc);
    return rc;
}

int evlog_create_artifact(store *st, const char *run_id, const json_t *doc, const json_t *verified,
                          const evlog_event *ev, json_t **reply)
{
    char *text = evlog_json_text(doc);
    char *parents = verified != NULL ? evlog_json_text(verified) : NULL;
    if (text == NULL || parents == NULL) {
        free(text);
        free(parents);
        return verified != NULL ? STATUS_ENOMEM : STATUS_EINVAL;
    }
    evlog_write_spec w = {
        .call = evlog_call_create_artifact,
        .run_id = run_id,
        .args = {text, parents},
        .nargs = 2,
        .ev = *ev,
        .run_must_exist = true,
    };
    int rc = evlog_write(st, &w, reply, NULL, NULL);
    free(text);
    free(parents);
    return rc;
}

int evlog_commit_delivery(store *st, const char *run_id, const json_t *doc, const evlog_event *ev,
                          json_t **reply)
{
    return evlog_commit_delivery_at(st, run_id, doc, NULL, NULL, ev, NULL, reply);
}

int evlog_commit_delivery_at(store *st, const char *run_id, const json_t *doc,
                             const char *facts_sha, const char *facts, const evlog_event *ev,
                             const evlog_head *head, json_t **reply)
{
    char *text = evlog_json_text(doc);
    if (text == NULL)
        return STATUS_ENOMEM;
    store_list *list = NULL;
    int rc = evlog_commit_delivery_text(st, run_id, text, facts_sha, facts, ev, head, reply, &list);
    if (rc == STATUS_OK && list != NULL) {
        /* Only a commit with "cached" answers a list. */
        store_list_free(list);
        rc = STATUS_EPROTO;
    }
    free(text);
    return rc;
}

int evlog_commit_delivery_text(store *st, const char *run_id, const char *doc,
                               const char *facts_sha, const char *facts, const evlog_event *ev,
                               const evlog_head *head, json_t **reply, store_list **list)
{
    *reply = NULL;
    *list = NULL;
    if ((facts_sha == NULL) != (facts == NULL) || (facts_sha != NULL && !evlog_hex64(facts_sha)))
        return STATUS_EINVAL;
    evlog_write_spec w = {
        .call_list = evlog_call_commit_delivery,
        .run_id = run_id,
        .args = {doc, facts_sha != NULL ? facts_sha : "", facts != NULL ? facts : ""},
        .nargs = 3,
        .ev = *ev,
        .known = head,
    };
    return evlog_write(st, &w, reply, list, NULL);
}

int evlog_interrupt_runs(store *st, json_t **ids)
{
    if (ids != NULL)
        *ids = NULL;
    json_t *reply = NULL;
    int rc = q_unfinished_runs(st, &reply);
    if (rc != STATUS_OK)
        return rc;
    json_t *done = json_array();
    if (done == NULL) {
        json_decref(reply);
        return STATUS_ENOMEM;
    }
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(reply, "runs"), i, v)
    {
        const char *id = json_string_value(v);
        if (id == NULL)
            continue;
        int one = evlog_transition(st, id, "running,recovering,pending_approval", "interrupted",
                                   "charterd restarted", NULL, NULL);
        if (one == STATUS_OK) {
            if (json_array_append_new(done, json_string(id)) != 0)
                one = STATUS_ENOMEM;
        } else if (one == STATUS_EREFUSED) {
            one = STATUS_OK; /* it moved on by itself meanwhile */
        }
        if (one != STATUS_OK && rc == STATUS_OK)
            rc = one;
    }
    json_decref(reply);
    if (ids != NULL && rc == STATUS_OK)
        *ids = done;
    else
        json_decref(done);
    return rc;
}
