/*
 * lineage.c - lineage records kept once by content, resolved for replay, and compared with the
 * graph by the input gate (see lineage.h).
 *
 * The records are named by SHA-1 because the query library computes the names while it walks
 * (redis.sha1hex is the hash its function engine offers); every name is checked here again
 * with OpenSSL before a record's facts or its references are used, and only a checked record
 * enters the process-wide cache the gate compares the graph with.
 */
#include "db/lineage.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "policy/lineage_walk.h"

#define LINEAGE_BATCH 16          /* records per charter_put_lineage call (2 arguments each) */
#define LINEAGE_READ_MAX "100000" /* records one resolution reads at most */
#define LINEAGE_GET_MAX 32        /* names per charter_lineage_get call */
#define CACHE_SLOTS 16384u        /* per thread; open addressing, a power of two */
#define CACHE_MAX 8192u           /* records a thread holds at most; emptied when full */

int lineage_keep(store *st, const json_t *ancestry)
{
    const json_t *fresh = json_object_get(ancestry, "new");
    if (!json_is_object(fresh))
        return STATUS_EPROTO;
    const char *args[2 * LINEAGE_BATCH];
    int n = 0;
    const char *sha;
    json_t *text;
    int rc = STATUS_OK;
    json_object_foreach((json_t *)fresh, sha, text)
    {
        if (!json_is_string(text))
            return STATUS_EPROTO;
        args[n++] = sha;
        args[n++] = json_string_value(text);
        if (n == 2 * LINEAGE_BATCH) {
            if ((rc = q_put_lineage(st, (size_t)n, args, NULL)) != STATUS_OK)
                return rc;
            n = 0;
        }
    }
    if (n > 0)
        rc = q_put_lineage(st, (size_t)n, args, NULL);
    return rc;
}

json_t *lineage_ref(const json_t *ancestry)
{
    const json_t *sha = json_object_get(ancestry, "lineage");
    const json_t *root = json_object_get(ancestry, "root");
    if (!json_is_string(sha) || !json_is_string(root))
        return NULL;
    return json_pack("{s:O, s:b, s:O}", "root", root, "truncated",
                     json_is_true(json_object_get(ancestry, "truncated")), "lineage", sha);
}

int lineage_graph_records(void *ctx, const char *sha, json_t **records, char *why, size_t n)
{
    *records = NULL;
    json_t *reply = NULL;
    int rc = q_lineage_records(ctx, sha, LINEAGE_READ_MAX, &reply);
    if (rc == STATUS_EINVAL) {
        snprintf(why, n, "lineage reference %.64s is malformed", sha);
        rc = STATUS_EPROTO;
    }
    if (rc == STATUS_OK && (*records = json_incref(json_object_get(reply, "records"))) == NULL)
        *records = json_object();
    json_decref(reply);
    return rc != STATUS_OK ? rc : *records != NULL ? STATUS_OK : STATUS_ENOMEM;
}

/* ---- a record as the graph spells it ---------------------------------------------------- */

/* The strings charter_lineage_state sends for an artifact that matches a record, joined by NUL
 * bytes as it joins them: head from id to step (10 strings), tail from the parent count to the
 * last producer. Records hold no NUL byte (the decoder refuses \u0000), so each string of the
 * record is one string of the state. */
typedef struct {
    char *head, *tail;
    size_t head_len, tail_len;
} lineage_expect;

typedef struct {
    char *p;
    size_t n, cap, strings;
    bool bad; /* out of memory, or a fact the state cannot spell */
} spell;

static void spell_put(spell *b, const char *s, size_t len)
{
    if (b->bad)
        return;
    size_t need = b->n + len + 2;
    if (need > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 256;
        while (cap < need)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->bad = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (b->strings++ > 0)
        b->p[b->n++] = '\0';
    memcpy(b->p + b->n, s, len);
    b->n += len;
}

/* A text fact; absent means the state cannot spell it (charter_lineage_state sends no
 * artifact that lacks a field: it walks in full instead). */
static void spell_text(spell *b, const json_t *v)
{
    if (!json_is_string(v))
        b->bad = true;
    else
        spell_put(b, json_string_value(v), json_string_length(v));
}

/* A label as the stored decimal text tonumber read it from: the integer's own spelling. */
static void spell_label(spell *b, const json_t *v)
{
    char buf[32];
    int w = json_is_integer(v)
                ? snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v))
                : -1;
    if (w <= 0 || (size_t)w >= sizeof buf)
        b->bad = true;
    else
        spell_put(b, buf, (size_t)w);
}

static void spell_count(spell *b, size_t n)
{
    char buf[32];
    int w = snprintf(buf, sizeof buf, "%zu", n);
    spell_put(b, buf, (size_t)w);
}

/* A list of the record: an array, or {} (cjson's empty list). */
static bool record_list(const json_t *v, size_t *n)
{
    if (json_is_array(v)) {
        *n = json_array_size(v);
        return true;
    }
    *n = 0;
    return json_is_object(v) && json_object_size(v) == 0;
}

/* input_ids as the stored JSON text it was decoded from: the list's plain encoding, each id
 * of characters JSON writes as they are (so that text decodes to exactly the list). */
static void spell_inputs(spell *b, const json_t *v)
{
    size_t n;
    if (!record_list(v, &n)) {
        b->bad = true;
        return;
    }
    /* built in one: the list's text is a single string of the state */
    char *text = NULL;
    size_t len = 2, at = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (!json_is_string(e)) {
            b->bad = true;
            return;
        }
        len += json_string_length(e) + 3;
    }
    text = malloc(len + 1);
    if (text == NULL) {
        b->bad = true;
        return;
    }
    text[at++] = '[';
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        const char *id = json_string_value(e);
        size_t idlen = json_string_length(e);
        for (size_t k = 0; k < idlen; k++) {
            unsigned char c = (unsigned char)id[k];
            if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '/')
                b->bad = true;
        }
        if (i > 0)
            text[at++] = ',';
        text[at++] = '"';
        memcpy(text + at, id, idlen);
        at += idlen;
        text[at++] = '"';
    }
    text[at++] = ']';
    spell_put(b, text, at);
    free(text);
}

static void spell_strings(spell *b, const json_t *v)
{
    size_t n;
    if (!record_list(v, &n)) {
        b->bad = true;
        return;
    }
    spell_count(b, n);
    for (size_t i = 0; i < n; i++)
        spell_text(b, json_array_get(v, i));
}

static void expect_free(lineage_expect *e)
{
    if (e == NULL)
        return;
    free(e->head);
    free(e->tail);
    free(e);
}

/* How the state spells rec, or NULL when it cannot (the record then never matches). */
static lineage_expect *expect_of(const json_t *rec)
{
    spell h = {0}, t = {0};
    static const char *const heads[] = {"id", "run_id", "kind", "title"};
    for (size_t k = 0; k < 4; k++)
        spell_text(&h, json_object_get(rec, heads[k]));
    spell_label(&h, json_object_get(rec, "conf"));
    spell_label(&h, json_object_get(rec, "integrity"));
    const json_t *cc = json_object_get(rec, "capture_complete");
    if (!json_is_boolean(cc))
        h.bad = true;
    spell_put(&h, json_is_true(cc) ? "1" : "0", 1);
    spell_text(&h, json_object_get(rec, "hash"));
    spell_inputs(&h, json_object_get(rec, "input_ids"));
    spell_text(&h, json_object_get(rec, "step"));

    spell_strings(&t, json_object_get(rec, "parents"));
    const json_t *res = json_object_get(rec, "resources");
    size_t nr;
    if (!record_list(res, &nr))
        t.bad = true;
    spell_count(&t, nr);
    for (size_t r = 0; r < nr; r++) {
        const json_t *o = json_array_get(res, r);
        spell_text(&t, json_object_get(o, "id"));
        spell_text(&t, json_object_get(o, "title"));
        spell_label(&t, json_object_get(o, "conf"));
        spell_label(&t, json_object_get(o, "integrity"));
    }
    spell_strings(&t, json_object_get(rec, "producers"));
    size_t nrefs, np;
    if (!record_list(json_object_get(rec, "refs"), &nrefs) ||
        !record_list(json_object_get(rec, "parents"), &np) || nrefs != np)
        t.bad = true;
    lineage_expect *e = h.bad || t.bad ? NULL : calloc(1, sizeof *e);
    if (e == NULL) {
        free(h.p);
        free(t.p);
        return NULL;
    }
    e->head = h.p;
    e->head_len = h.n;
    e->tail = t.p;
    e->tail_len = t.n;
    return e;
}

/* ---- the record cache ------------------------------------------------------------------ */

/* Decoded records by name, one cache per thread (a call is served by one worker thread from
 * start to end). A record enters only after its text was hashed here and found to hash to its
 * name, so an entry is the record its name says: the name is the content, and no graph change
 * can make an entry wrong, only unused. When full, the cache is emptied (bounded memory; a
 * check then reads its records again). Per thread, because jansson counts references without
 * locking (its json_incref reads the count plainly): no entry is ever shared between threads,
 * so a check hands the guard the entries themselves, with no lock and no copy. */
typedef struct {
    char sha[41];
    json_t *rec; /* {"rec": the record, "head", "tail": its spelling (absent: it has none)} */
} cache_slot;

typedef struct {
    size_t used;
    cache_slot slots[CACHE_SLOTS];
} record_cache;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static bool cache_key_ok;

/* The thread's cache at its exit. */
static void cache_free(void *p)
{
    record_cache *c = p;
    for (size_t i = 0; i < CACHE_SLOTS; i++)
        json_decref(c->slots[i].rec);
    free(c);
}

static void cache_key_make(void)
{
    cache_key_ok = pthread_key_create(&cache_key, cache_free) == 0;
}

/* This thread's cache, made on first use; NULL without memory (nothing is cached then). */
static record_cache *cache_mine(void)
{
    if (pthread_once(&cache_once, cache_key_make) != 0 || !cache_key_ok)
        return NULL;
    record_cache *c = pthread_getspecific(cache_key);
    if (c == NULL && (c = calloc(1, sizeof *c)) != NULL && pthread_setspecific(cache_key, c) != 0) {
        free(c);
        c = NULL;
    }
    return c;
}

static size_t cache_home(const char *sha)
{
    uint32_t h = 0;
    for (int i = 0; i < 8; i++) {
        char c = sha[i];
        h = (h << 4) | (uint32_t)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    return h & (CACHE_SLOTS - 1);
}

/* A new reference to this thread's cache entry of the record named sha, or NULL. */
static json_t *cache_get(const char *sha)
{
    record_cache *c = cache_mine();
    if (c == NULL)
        return NULL;
    for (size_t i = cache_home(sha), k = 0; k < CACHE_SLOTS; i = (i + 1) & (CACHE_SLOTS - 1), k++) {
        if (c->slots[i].rec == NULL)
            break;
        if (memcmp(c->slots[i].sha, sha, 40) == 0)
            return json_incref(c->slots[i].rec);
    }
    return NULL;
}

/* Holds entry (of a verified record, stolen) under sha in this thread's cache. */
static void cache_put(const char *sha, json_t *entry)
{
    record_cache *c = cache_mine();
    if (c == NULL) {
        json_decref(entry);
        return;
    }
    if (c->used >= CACHE_MAX) {
        for (size_t i = 0; i < CACHE_SLOTS; i++) {
            json_decref(c->slots[i].rec);
            c->slots[i].rec = NULL;
        }
        c->used = 0;
    }
    size_t i = cache_home(sha);
    while (c->slots[i].rec != NULL && memcmp(c->slots[i].sha, sha, 40) != 0)
        i = (i + 1) & (CACHE_SLOTS - 1);
    if (c->slots[i].rec == NULL) {
        memcpy(c->slots[i].sha, sha, 40);
        c->slots[i].sha[40] = '\0';
        c->slots[i].rec = entry;
        c->used++;
    } else {
        json_decref(entry); /* held already */
    }
}

static bool is_sha1_hex(const char *s, size_t len)
{
    return s != NULL && len == 40 && digest_is_hex(s, 40);
}

/* Hashes each record of records ({"<sha1>":"<text>"}) and caches the ones that hash to their
 * name and decode to an object; the others are left out (the check then walks the graph). */
static void cache_records(const json_t *records)
{
    const char *sha;
    json_t *text;
    json_object_foreach((json_t *)records, sha, text)
    {
        char actual[41];
        const char *t = json_string_value(text);
        if (t == NULL || !is_sha1_hex(sha, strlen(sha)) ||
            digest_sha1_hex(t, json_string_length(text), actual) != 0 || strcmp(actual, sha) != 0)
            continue;
        json_t *rec = json_loadb(t, json_string_length(text), 0, NULL);
        json_t *entry = json_is_object(rec) ? json_pack("{s:O}", "rec", rec) : NULL;
        lineage_expect *e = entry ? expect_of(rec) : NULL;
        if (e && (json_object_set_new(entry, "head", json_stringn(e->head, e->head_len)) ||
                  json_object_set_new(entry, "tail", json_stringn(e->tail, e->tail_len)))) {
            json_decref(entry);
            entry = NULL;
        }
        expect_free(e);
        json_decref(rec); /* entry holds it */
        if (entry)
            cache_put(sha, entry);
    }
}

/* ---- a check against the records ------------------------------------------------------- */

/* The strings of a charter_lineage_state reply's text, split at its NUL bytes: each one is a
 * NUL-terminated string in buf, a copy of the text that tokens own. */
typedef struct {
    char *buf;
    const char **s;
    size_t *len;
    size_t n;
} tokens;

static const char *tok_get(const tokens *t, size_t i, size_t *len)
{
    if (len)
        *len = i < t->n ? t->len[i] : 0;
    return i < t->n ? t->s[i] : NULL;
}

/* Splits text (len bytes) into t, which must then hold exactly n strings: a NUL byte inside a
 * stored value would add one, so no value can pass for the strings after it. */
static int tokens_split(const char *text, size_t len, size_t n, tokens *t)
{
    t->n = 0;
    t->buf = malloc(len + 1);
    t->s = calloc(n ? n : 1, sizeof *t->s);
    t->len = calloc(n ? n : 1, sizeof *t->len);
    if (t->buf == NULL || t->s == NULL || t->len == NULL)
        return STATUS_ENOMEM;
    memcpy(t->buf, text, len);
    t->buf[len] = '\0';
    const char *at = t->buf, *end = t->buf + len;
    for (;;) {
        const char *nul = memchr(at, '\0', (size_t)(end - at));
        if (t->n == n)
            return STATUS_EPROTO;
        t->s[t->n] = at;
        t->len[t->n++] = (size_t)((nul ? nul : end) - at);
        if (nul == NULL)
            break;
        at = nul + 1;
    }
    return t->n == n ? STATUS_OK : STATUS_EPROTO;
}

static void tokens_free(tokens *t)
{
    free(t->buf);
    free(t->s);
    free(t->len);
}

/* One artifact of a charter_lineage_state reply: the index of its id in the list, of its
 * parent count, resource count and producer count, and its record. */
typedef struct {
    size_t at, np_at, nr_at, nc_at, np, nr, nc;
    json_t *rec;
} state_item;

enum {
    F_RUN_ID = 1,
    F_KIND,
    F_TITLE,
    F_CONF,
    F_INTEGRITY,
    F_CAPTURE,
    F_HASH,
    F_INPUTS,
    F_STEP,
    F_LINEAGE,
    F_COUNT
};

#define STATE_MISMATCH 1 /* the graph is not what the records say: walk it instead */

static int count_at(const tokens *l, size_t i, size_t *n)
{
    size_t len;
    const char *s = i < l->n ? tok_get(l, i, &len) : NULL;
    if (s == NULL || len == 0 || len > 6)
        return STATUS_EPROTO;
    *n = 0;
    for (size_t k = 0; k < len; k++) {
        if (s[k] < '0' || s[k] > '9')
            return STATUS_EPROTO;
        *n = *n * 10 + (size_t)(s[k] - '0');
    }
    return STATUS_OK;
}

/* The artifacts of the strings l (the layout charter_lineage_state documents). */
static int state_items(const tokens *l, state_item **out, size_t *n_out)
{
    size_t size = l->n, cap = 0, n = 0;
    state_item *items = NULL;
    int rc = STATUS_OK;
    for (size_t i = 0; rc == STATUS_OK && i < size;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            state_item *grown = realloc(items, cap * sizeof *items);
            if (grown == NULL) {
                rc = STATUS_ENOMEM;
                break;
            }
            items = grown;
        }
        state_item *it = &items[n];
        memset(it, 0, sizeof *it);
        it->at = i;
        it->np_at = i + F_COUNT;
        if ((rc = count_at(l, it->np_at, &it->np)) != STATUS_OK)
            break;
        it->nr_at = it->np_at + 1 + it->np;
        if ((rc = count_at(l, it->nr_at, &it->nr)) != STATUS_OK)
            break;
        it->nc_at = it->nr_at + 1 + 4 * it->nr;
        if ((rc = count_at(l, it->nc_at, &it->nc)) != STATUS_OK)
            break;
        i = it->nc_at + 1 + it->nc;
        if (i > size || tok_get(l, it->at, NULL) == NULL)
            rc = STATUS_EPROTO;
        n++;
    }
    if (rc == STATUS_OK && n == 0)
        rc = STATUS_EPROTO;
    if (rc != STATUS_OK) {
        free(items);
        return rc;
    }
    *out = items;
    *n_out = n;
    return STATUS_OK;
}

/* Item it of the state against its cache entry: the strings from id to step and from the
 * parent count to the last producer are the record's spelling byte for byte, and each ref of
 * the record is the record the parent the graph holds now names (by_id: artifact id to item). */
static bool item_matches(const tokens *l, const state_item *items, const state_item *it,
                         const json_t *by_id)
{
    const json_t *head = json_object_get(it->rec, "head");
    const json_t *tail = json_object_get(it->rec, "tail");
    const json_t *refs = json_object_get(json_object_get(it->rec, "rec"), "refs");
    if (head == NULL || tail == NULL)
        return false;
    /* The strings of the state are contiguous in l's buffer, one NUL between each two. */
    const char *h0 = l->s[it->at], *h1 = l->s[it->at + F_STEP] + l->len[it->at + F_STEP];
    size_t last = it->nc_at + it->nc;
    const char *t0 = l->s[it->np_at], *t1 = l->s[last] + l->len[last];
    if ((size_t)(h1 - h0) != json_string_length(head) ||
        memcmp(h0, json_string_value(head), (size_t)(h1 - h0)) != 0 ||
        (size_t)(t1 - t0) != json_string_length(tail) ||
        memcmp(t0, json_string_value(tail), (size_t)(t1 - t0)) != 0)
        return false;
    size_t nrefs = json_is_array(refs) ? json_array_size(refs) : 0;
    if (nrefs != it->np)
        return false;
    for (size_t m = 0; m < it->np; m++) {
        const json_t *j = json_object_get(by_id, l->s[it->np_at + 1 + m]);
        if (!json_is_integer(j))
            return false;
        const state_item *parent = &items[json_integer_value(j)];
        const json_t *ref = json_array_get(refs, m);
        size_t plen = l->len[parent->at + F_LINEAGE];
        if (!json_is_string(ref) || json_string_length(ref) != plen ||
            memcmp(json_string_value(ref), l->s[parent->at + F_LINEAGE], plen) != 0)
            return false;
    }
    return true;
}

/* Reads the records the cache lacks (the n names of missing) into the cache: one
 * charter_lineage_get when they are few, else every record reachable from top. */
static int fetch_records(store *st, const char **missing, size_t n, const char *top)
{
    json_t *reply = NULL;
    int rc;
    if (n <= LINEAGE_GET_MAX) {
        rc = q_lineage_get(st, n, missing, &reply);
    } else {
        rc = q_lineage_records(st, top, LINEAGE_READ_MAX, &reply);
    }
    if (rc == STATUS_OK)
        cache_records(json_object_get(reply, "records"));
    json_decref(reply);
    return rc;
}

/* The ancestry of the state l, built from the records it matches (*out), or STATE_MISMATCH. */
static int from_state(store *st, const char *payload, const tokens *l, json_t **out)
{
    state_item *items = NULL;
    size_t n = 0;
    int rc = state_items(l, &items, &n);
    if (rc != STATUS_OK)
        return rc;
    json_t *by_id = json_object();
    const char **missing = calloc(n, sizeof *missing);
    size_t n_missing = 0;
    if (by_id == NULL || missing == NULL)
        rc = STATUS_ENOMEM;
    for (size_t i = 0; rc == STATUS_OK && i < n; i++) {
        size_t len;
        const char *sha = tok_get(l, items[i].at + F_LINEAGE, &len);
        if (!is_sha1_hex(sha, len)) {
            rc = STATE_MISMATCH;
            break;
        }
        if (json_object_set_new(by_id, tok_get(l, items[i].at, NULL),
                                json_integer((json_int_t)i)) != 0)
            rc = STATUS_ENOMEM;
        else if ((items[i].rec = cache_get(sha)) == NULL)
            missing[n_missing++] = sha;
    }
    if (rc == STATUS_OK && n_missing > 0) {
        rc = fetch_records(st, missing, n_missing, tok_get(l, items[0].at + F_LINEAGE, NULL));
        for (size_t i = 0; rc == STATUS_OK && i < n; i++)
            if (items[i].rec == NULL &&
                (items[i].rec = cache_get(tok_get(l, items[i].at + F_LINEAGE, NULL))) == NULL)
                rc = STATE_MISMATCH; /* not stored, or altered: the walk stores it again */
    }
    if (rc == STATUS_OK && strcmp(tok_get(l, items[0].at, NULL), payload) != 0)
        rc = STATUS_EPROTO;
    for (size_t i = 0; rc == STATUS_OK && i < n; i++)
        if (!item_matches(l, items, &items[i], by_id))
            rc = STATE_MISMATCH;
    json_t *artifacts = rc == STATUS_OK ? json_array() : NULL;
    if (rc == STATUS_OK && artifacts == NULL)
        rc = STATUS_ENOMEM;
    for (size_t i = 0; rc == STATUS_OK && i < n; i++)
        if (json_array_append(artifacts, json_object_get(items[i].rec, "rec")) != 0)
            rc = STATUS_ENOMEM;
    if (rc == STATUS_OK) {
        *out = json_pack("{s:s, s:b, s:s, s:{}, s:O}", "root", payload, "truncated", 0, "lineage",
                         tok_get(l, items[0].at + F_LINEAGE, NULL), "new", "artifacts", artifacts);
        if (*out == NULL)
            rc = STATUS_ENOMEM;
    }
    json_decref(artifacts);
    for (size_t i = 0; items != NULL && i < n; i++)
        json_decref(items[i].rec);
    free(items);
    free(missing);
    json_decref(by_id);
    return rc;
}

int lineage_ancestry(store *st, const char *payload, const char *limit, json_t **out)
{
    *out = NULL;
    json_t *full = NULL;
    store_list *state = NULL;
    int rc = q_lineage_state(st, payload, limit, &full, &state);
    if (rc == STATUS_OK && full == NULL && state == NULL)
        rc = STATUS_EPROTO;
    if (rc != STATUS_OK || full != NULL) {
        *out = full;
        return rc;
    }
    size_t len, count_len, text_len;
    const char *tag = store_list_size(state) == 3 ? store_list_get(state, 0, &len) : NULL;
    const char *count = tag ? store_list_get(state, 1, &count_len) : NULL;
    const char *text = tag ? store_list_get(state, 2, &text_len) : NULL;
    char *end = NULL;
    unsigned long long n = count ? strtoull(count, &end, 10) : 0;
    tokens t = {0};
    if (tag == NULL || len != 5 || memcmp(tag, "state", 5) != 0 || text == NULL ||
        end != count + count_len || count_len == 0 || n == 0 || n > text_len + 1)
        rc = STATUS_EPROTO;
    if (rc == STATUS_OK)
        rc = tokens_split(text, text_len, (size_t)n, &t);
    if (rc == STATUS_OK)
        rc = from_state(st, payload, &t, out);
    tokens_free(&t);
    store_list_free(state);
    /* The graph is not what its records say (an edge deleted, a label changed, a record
     * missing): decide from the graph as it is, walked in full. */
    if (rc == STATE_MISMATCH)
        rc = q_ancestry(st, payload, limit, out);
    return rc;
}
