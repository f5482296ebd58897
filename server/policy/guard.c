/*
 * guard.c - the guard: lineage and delegation facts in, allow / deny / unknown out.
 *
 * Pure functions only: no I/O, no clock (the time is the `now` argument), and the only memory
 * kept is the decision handed back. An ancestry is indexed once by artifact id (open addressing)
 * and then walked with explicit queues, never recursion, so a lineage 10,000 artifacts deep
 * costs O(artifacts + edges) time and no stack. Every check that fails adds its code; the
 * witness is that of the first code in witness_priority, so a decision reads the same way
 * whatever order the facts arrived in.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/guard.h"

#define NO_INDEX SIZE_MAX
/* " → " in UTF-8: the separator of a witness path. */
#define ARROW " \xe2\x86\x92 "

/*
 * Which code's witness a decision carries when several apply. Missing facts come first (they
 * make the outcome UNKNOWN, and the witness must say why); then what the request got wrong
 * against its own step; then what is wrong with the lineage, then with what it may reach;
 * then the authority it acts under.
 */
static const guard_code witness_priority[GUARD_CODE_COUNT] = {
    GUARD_EFFECT_UNKNOWN,        GUARD_GRAPH_ERROR,           GUARD_TOOL_NOT_PERMITTED,
    GUARD_STEP_MISMATCH,         GUARD_IDENTITY_MISMATCH,     GUARD_GRANT_NOT_FOUND,
    GUARD_PROVENANCE_INCOMPLETE, GUARD_LABEL_MISMATCH,        GUARD_RESOURCE_QUARANTINED,
    GUARD_INPUT_OUT_OF_SCOPE,    GUARD_CONTROL_UNTRUSTED,     GUARD_RECIPIENT_UNKNOWN,
    GUARD_CLEARANCE_EXCEEDED,    GUARD_RESOURCE_OUT_OF_SCOPE, GUARD_GRANT_INVALID,
    GUARD_DELIVERY_CONFLICT,
};

/* ---------------------------------------------------------------------------------------- */
/* Small values                                                                              */
/* ---------------------------------------------------------------------------------------- */

static bool str_eq(const char *a, const char *b)
{
    return a != NULL && b != NULL && strcmp(a, b) == 0;
}

static bool strs_has(const guard_strs *list, const char *s)
{
    if (list == NULL || list->items == NULL || s == NULL)
        return false;
    for (size_t i = 0; i < list->n; i++)
        if (str_eq(list->items[i], s))
            return true;
    return false;
}

static bool conf_valid(int conf)
{
    return conf >= GUARD_CONF_PUBLIC && conf <= GUARD_CONF_CONFIDENTIAL;
}

static bool integrity_valid(int integrity)
{
    return integrity == GUARD_INTEGRITY_UNTRUSTED || integrity == GUARD_INTEGRITY_TRUSTED;
}

static const char *conf_name(int conf)
{
    switch (conf) {
    case GUARD_CONF_PUBLIC:
        return "public";
    case GUARD_CONF_INTERNAL:
        return "internal";
    case GUARD_CONF_CONFIDENTIAL:
        return "confidential";
    default:
        return "missing";
    }
}

static const char *integrity_name(int integrity)
{
    switch (integrity) {
    case GUARD_INTEGRITY_UNTRUSTED:
        return "untrusted";
    case GUARD_INTEGRITY_TRUSTED:
        return "trusted";
    default:
        return "missing";
    }
}

/* A hex SHA-256: exactly 64 hex digits. */
static bool hash_valid(const char *h)
{
    if (h == NULL)
        return false;
    size_t i = 0;
    for (; h[i] != '\0'; i++) {
        char c = h[i];
        bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (!hex || i >= 64)
            return false;
    }
    return i == 64;
}

static const char *or_missing(const char *s)
{
    return s != NULL ? s : "(missing)";
}

/* The name a witness path shows for an artifact: its title, else its id. */
static const char *artifact_name(const guard_artifact *a)
{
    if (a->title != NULL && a->title[0] != '\0')
        return a->title;
    return or_missing(a->id);
}

/* Decimal text of v in buf; returns the start of the digits inside buf. */
static const char *fmt_size(char buf[24], size_t v)
{
    size_t i = 23;
    buf[i] = '\0';
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0 && i > 0);
    return buf + i;
}

/* calloc for n elements, never asking for 0 bytes (so NULL always means failure). */
static void *alloc_array(size_t n, size_t size)
{
    return calloc(n != 0 ? n : 1, size);
}

static char *str_copy(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p != NULL)
        memcpy(p, s, n);
    return p;
}

/* ---------------------------------------------------------------------------------------- */
/* Witness text: a growable string over malloc/realloc                                      */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    char *s;
    size_t len;
    size_t cap;
    bool failed; /* an allocation failed; the text is lost */
} strbuf;

static void sb_putn(strbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (n > SIZE_MAX - b->len - 1) {
        b->failed = true;
        return;
    }
    size_t need = b->len + n + 1;
    if (need > b->cap) {
        size_t cap = b->cap != 0 ? b->cap : 64;
        while (cap < need) {
            if (cap > SIZE_MAX / 2) {
                b->failed = true;
                return;
            }
            cap *= 2;
        }
        char *p = realloc(b->s, cap);
        if (p == NULL) {
            b->failed = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

/* s into b, each control character escaped ("\n", "\x1b"): a fact never forges a line or a
 * terminal sequence wherever a witness is shown. */
static void sb_put(strbuf *b, const char *s)
{
    s = or_missing(s);
    for (;;) {
        size_t plain = 0;
        while (s[plain] != '\0' && (unsigned char)s[plain] >= 0x20 && s[plain] != 0x7f)
            plain++;
        sb_putn(b, s, plain);
        if (s[plain] == '\0')
            return;
        static const char hex[] = "0123456789abcdef";
        unsigned char c = (unsigned char)s[plain];
        char esc[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
        if (c == '\n' || c == '\t' || c == '\r')
            esc[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
        sb_putn(b, esc, esc[1] == 'x' ? 4 : 2);
        s += plain + 1;
    }
}

/* "{a, b, c}" in list order. */
static void sb_strs(strbuf *b, const guard_strs *list)
{
    sb_put(b, "{");
    for (size_t i = 0; list->items != NULL && i < list->n; i++) {
        if (i > 0)
            sb_put(b, ", ");
        sb_put(b, list->items[i]);
    }
    sb_put(b, "}");
}

static void sb_actors(strbuf *b, const guard_actor_ref *refs, size_t n)
{
    sb_put(b, "{");
    for (size_t i = 0; refs != NULL && i < n; i++) {
        if (i > 0)
            sb_put(b, ", ");
        sb_put(b, refs[i].id);
    }
    sb_put(b, "}");
}

/* The text, owned by the caller; NULL when an allocation failed (the buffer is freed). */
static char *sb_take(strbuf *b)
{
    if (!b->failed && b->s == NULL)
        sb_putn(b, "", 0);
    if (b->failed) {
        free(b->s);
        b->s = NULL;
        return NULL;
    }
    char *s = b->s;
    b->s = NULL;
    return s;
}

/* ---------------------------------------------------------------------------------------- */
/* Collecting codes and witnesses                                                            */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    unsigned codes;
    char *witness[GUARD_CODE_COUNT]; /* the first witness found for each code */
    bool oom;
} verdict;

/* Sets code; returns true when its witness is still to be written into *b (then the caller
 * writes it and calls flag_end). Witnesses after the first of a code are never built. */
static bool flag_begin(verdict *v, guard_code code, strbuf *b)
{
    v->codes |= 1u << code;
    memset(b, 0, sizeof *b);
    return v->witness[code] == NULL && !v->oom;
}

static void flag_end(verdict *v, guard_code code, strbuf *b)
{
    char *w = sb_take(b);
    if (w == NULL)
        v->oom = true;
    else
        v->witness[code] = w;
}

/* Sets code with a witness made of the string arguments up to END (a NULL argument reads as
 * "(missing)", since facts may be missing). */
static const char flag_parts_end[] = "";
#define END flag_parts_end

static void flag(verdict *v, guard_code code, ...)
{
    strbuf b;
    if (!flag_begin(v, code, &b))
        return;
    va_list ap;
    va_start(ap, code);
    for (;;) {
        const char *part = va_arg(ap, const char *);
        if (part == flag_parts_end)
            break;
        sb_put(&b, part);
    }
    va_end(ap);
    flag_end(v, code, &b);
}

static void verdict_clear(verdict *v)
{
    for (size_t i = 0; i < GUARD_CODE_COUNT; i++) {
        free(v->witness[i]);
        v->witness[i] = NULL;
    }
}

/* Borrowed ids into a guard_strs the decision owns (the array only). */
static int strs_borrow(guard_strs *out, const char *const *ids, size_t n)
{
    out->items = NULL;
    out->n = 0;
    if (n == 0)
        return 0;
    out->items = alloc_array(n, sizeof *out->items);
    if (out->items == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        out->items[i] = (char *)ids[i];
    out->n = n;
    return 0;
}

static int fail_oom(verdict *v, guard_decision *out)
{
    verdict_clear(v);
    guard_decision_free(out);
    guard_decision_unknown(out, "guard: out of memory");
    return -1;
}

/* Turns the collected codes into *out: UNKNOWN when facts were missing (GRAPH_ERROR), DENY
 * when any other code applies, else ALLOW with the chain order and sources (borrowed). */
static int verdict_finish(verdict *v, guard_decision *out, const char *const *chain, size_t n_chain,
                          const char *const *sources, size_t n_sources)
{
    memset(out, 0, sizeof *out);
    if (v->oom)
        return fail_oom(v, out);
    if (v->codes & (1u << GUARD_GRAPH_ERROR))
        out->outcome = GUARD_UNKNOWN;
    else if (v->codes != 0)
        out->outcome = GUARD_DENY;
    else
        out->outcome = GUARD_ALLOW;
    out->codes = v->codes;
    for (size_t i = 0; i < GUARD_CODE_COUNT; i++) {
        guard_code c = witness_priority[i];
        if ((v->codes & (1u << c)) && v->witness[c] != NULL) {
            out->witness = v->witness[c];
            v->witness[c] = NULL;
            break;
        }
    }
    verdict_clear(v);
    if (out->outcome == GUARD_ALLOW) {
        if (strs_borrow(&out->chain_order, chain, n_chain) < 0 ||
            strs_borrow(&out->sources, sources, n_sources) < 0)
            return fail_oom(v, out);
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Id index: open addressing over an array of keys                                           */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    const char **keys; /* borrowed; keys[i] is item i's id (NULL ids are not indexed) */
    size_t *slots;     /* item index + 1; 0 marks an empty slot */
    size_t mask;
    size_t dup; /* the first item whose id repeats an earlier one, NO_INDEX if none */
} id_index;

static uint64_t id_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static int index_build(id_index *ix, const char **keys, size_t n)
{
    ix->keys = keys;
    ix->dup = NO_INDEX;
    ix->slots = NULL;
    if (n > SIZE_MAX / 4)
        return -1;
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    ix->slots = alloc_array(cap, sizeof *ix->slots);
    if (ix->slots == NULL)
        return -1;
    ix->mask = cap - 1;
    for (size_t i = 0; i < n; i++) {
        if (keys[i] == NULL)
            continue;
        size_t s = (size_t)id_hash(keys[i]) & ix->mask;
        for (;; s = (s + 1) & ix->mask) {
            if (ix->slots[s] == 0) {
                ix->slots[s] = i + 1;
                break;
            }
            if (strcmp(keys[ix->slots[s] - 1], keys[i]) == 0) {
                if (ix->dup == NO_INDEX)
                    ix->dup = i;
                break;
            }
        }
    }
    return 0;
}

static size_t index_find(const id_index *ix, const char *key)
{
    if (key == NULL || ix->slots == NULL)
        return NO_INDEX;
    for (size_t s = (size_t)id_hash(key) & ix->mask;; s = (s + 1) & ix->mask) {
        if (ix->slots[s] == 0)
            return NO_INDEX;
        if (strcmp(ix->keys[ix->slots[s] - 1], key) == 0)
            return ix->slots[s] - 1;
    }
}

static void index_free(id_index *ix)
{
    free(ix->slots);
    ix->slots = NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Lineage: the ancestry as an indexed graph                                                 */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    const guard_ancestry *anc;
    const char **keys;
    id_index ix;
    size_t *par_off; /* n + 1 offsets into par */
    size_t *par;     /* parents present in the ancestry, as item indices */
    size_t root;     /* the root's item index, NO_INDEX when absent */
    size_t *order;   /* reachable items breadth-first from root, then the unreachable ones */
    size_t n_reached;
    size_t *prev; /* the item through which an item was first reached, NO_INDEX for root */
    bool *reached;
    int *conf; /* recomputed labels; -1 where the ancestry cannot supply them */
    int *integrity;
    size_t cycle_at; /* an item on a DERIVED_FROM cycle, NO_INDEX when acyclic */
} lineage;

static void lineage_free(lineage *lin)
{
    index_free(&lin->ix);
    free(lin->keys);
    free(lin->par_off);
    free(lin->par);
    free(lin->order);
    free(lin->prev);
    free(lin->reached);
    free(lin->conf);
    free(lin->integrity);
    memset(lin, 0, sizeof *lin);
}

/* Index the artifacts and resolve each DERIVED_FROM edge to an item index. */
static int lineage_index(lineage *lin)
{
    const guard_ancestry *anc = lin->anc;
    size_t n = anc->n;
    size_t edges = 0;
    for (size_t i = 0; i < n; i++) {
        const guard_strs *p = &anc->items[i].parents;
        if (p->items == NULL)
            continue;
        if (p->n > SIZE_MAX - edges)
            return -1;
        edges += p->n;
    }
    lin->keys = alloc_array(n, sizeof *lin->keys);
    lin->par_off = alloc_array(n + 1, sizeof *lin->par_off);
    lin->par = alloc_array(edges, sizeof *lin->par);
    if (lin->keys == NULL || lin->par_off == NULL || lin->par == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        lin->keys[i] = anc->items[i].id;
    if (index_build(&lin->ix, lin->keys, n) < 0)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        lin->par_off[i] = k;
        const guard_strs *p = &anc->items[i].parents;
        for (size_t j = 0; p->items != NULL && j < p->n; j++) {
            size_t at = index_find(&lin->ix, p->items[j]);
            if (at != NO_INDEX)
                lin->par[k++] = at;
        }
    }
    lin->par_off[n] = k;
    return 0;
}

/* Breadth-first from root over DERIVED_FROM, so the first offending source met lies on a
 * shortest path (the witness the caller reports). */
static int lineage_reach(lineage *lin, const char *root)
{
    size_t n = lin->anc->n;
    lin->order = alloc_array(n, sizeof *lin->order);
    lin->prev = alloc_array(n, sizeof *lin->prev);
    lin->reached = alloc_array(n, sizeof *lin->reached);
    if (lin->order == NULL || lin->prev == NULL || lin->reached == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        lin->prev[i] = NO_INDEX;
    lin->root = index_find(&lin->ix, root);
    size_t head = 0, tail = 0;
    if (lin->root != NO_INDEX) {
        lin->order[tail++] = lin->root;
        lin->reached[lin->root] = true;
    }
    while (head < tail) {
        size_t x = lin->order[head++];
        for (size_t k = lin->par_off[x]; k < lin->par_off[x + 1]; k++) {
            size_t p = lin->par[k];
            if (!lin->reached[p]) {
                lin->reached[p] = true;
                lin->prev[p] = x;
                lin->order[tail++] = p;
            }
        }
    }
    lin->n_reached = tail;
    for (size_t i = 0; i < n; i++)
        if (!lin->reached[i])
            lin->order[tail++] = i;
    return 0;
}

/* The label of item i from its registered resource (source) or from its parents, which Kahn's
 * order has already labelled (derived). */
static void label_item(lineage *lin, size_t i)
{
    const guard_artifact *a = &lin->anc->items[i];
    int conf = -1, integrity = -1;
    if (a->kind_known && a->is_source) {
        if (a->n_resources == 1 && a->resources != NULL && conf_valid(a->resources[0].conf) &&
            integrity_valid(a->resources[0].integrity)) {
            conf = a->resources[0].conf;
            integrity = a->resources[0].integrity;
        }
    } else if (a->kind_known) {
        size_t present = lin->par_off[i + 1] - lin->par_off[i];
        if (a->parents.n > 0 && a->parents.items != NULL && present == a->parents.n) {
            conf = GUARD_CONF_PUBLIC;
            integrity = GUARD_INTEGRITY_TRUSTED;
            for (size_t k = lin->par_off[i]; k < lin->par_off[i + 1]; k++) {
                size_t p = lin->par[k];
                if (lin->conf[p] < 0) {
                    conf = integrity = -1;
                    break;
                }
                if (lin->conf[p] > conf)
                    conf = lin->conf[p];
                if (lin->integrity[p] < integrity)
                    integrity = lin->integrity[p];
            }
        }
    }
    lin->conf[i] = conf;
    lin->integrity[i] = integrity;
}

/*
 * Recomputes every label in topological order (Kahn: an artifact is labelled once all its
 * parents are). Artifacts never reached lie on a cycle or descend from one; they stay -1 and
 * cycle_at names one artifact on a cycle.
 */
static int lineage_labels(lineage *lin)
{
    size_t n = lin->anc->n;
    size_t edges = lin->par_off[n];
    int rc = -1;
    size_t *pending = alloc_array(n, sizeof *pending);
    size_t *child_off = alloc_array(n + 1, sizeof *child_off);
    size_t *child = alloc_array(edges, sizeof *child);
    size_t *queue = alloc_array(n, sizeof *queue);
    unsigned char *state = alloc_array(n, sizeof *state); /* 0 waiting, 1 labelled, 2 seen */
    lin->conf = alloc_array(n, sizeof *lin->conf);
    lin->integrity = alloc_array(n, sizeof *lin->integrity);
    if (pending == NULL || child_off == NULL || child == NULL || queue == NULL || state == NULL ||
        lin->conf == NULL || lin->integrity == NULL)
        goto out;
    for (size_t i = 0; i < n; i++) {
        lin->conf[i] = lin->integrity[i] = -1;
        pending[i] = lin->par_off[i + 1] - lin->par_off[i];
        for (size_t k = lin->par_off[i]; k < lin->par_off[i + 1]; k++)
            child_off[lin->par[k] + 1]++;
    }
    for (size_t i = 0; i < n; i++)
        child_off[i + 1] += child_off[i];
    /* queue doubles as the fill cursor before it becomes the queue */
    for (size_t i = 0; i < n; i++)
        queue[i] = child_off[i];
    for (size_t i = 0; i < n; i++)
        for (size_t k = lin->par_off[i]; k < lin->par_off[i + 1]; k++)
            child[queue[lin->par[k]]++] = i;
    size_t head = 0, tail = 0;
    for (size_t i = 0; i < n; i++)
        if (pending[i] == 0)
            queue[tail++] = i;
    while (head < tail) {
        size_t x = queue[head++];
        label_item(lin, x);
        state[x] = 1;
        for (size_t k = child_off[x]; k < child_off[x + 1]; k++)
            if (--pending[child[k]] == 0)
                queue[tail++] = child[k];
    }
    lin->cycle_at = NO_INDEX;
    if (tail < n) {
        /* Every waiting artifact has a waiting parent, so following waiting parents must come
         * back to an artifact already seen: that one is on a cycle. */
        size_t x = 0;
        while (state[x] != 0)
            x++;
        while (state[x] != 2) {
            state[x] = 2;
            size_t next = NO_INDEX;
            for (size_t k = lin->par_off[x]; k < lin->par_off[x + 1] && next == NO_INDEX; k++)
                if (state[lin->par[k]] != 1)
                    next = lin->par[k];
            if (next == NO_INDEX)
                break; /* cannot happen: x would have been labelled */
            x = next;
        }
        lin->cycle_at = x;
    }
    rc = 0;
out:
    free(pending);
    free(child_off);
    free(child);
    free(queue);
    free(state);
    return rc;
}

static int lineage_build(lineage *lin, const guard_ancestry *anc, const char *root)
{
    memset(lin, 0, sizeof *lin);
    lin->anc = anc;
    lin->root = NO_INDEX;
    lin->cycle_at = NO_INDEX;
    if (lineage_index(lin) < 0 || lineage_reach(lin, root) < 0 || lineage_labels(lin) < 0)
        return -1;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The distinct resource ids reachable from root, sorted (borrowed from the facts). */
static int lineage_sources(const lineage *lin, const char ***out, size_t *n_out)
{
    size_t total = 0;
    for (size_t k = 0; k < lin->n_reached; k++) {
        const guard_artifact *a = &lin->anc->items[lin->order[k]];
        if (a->resources != NULL)
            total += a->n_resources;
    }
    const char **ids = alloc_array(total, sizeof *ids);
    if (ids == NULL)
        return -1;
    size_t n = 0;
    for (size_t k = 0; k < lin->n_reached; k++) {
        const guard_artifact *a = &lin->anc->items[lin->order[k]];
        for (size_t r = 0; a->resources != NULL && r < a->n_resources; r++)
            if (a->resources[r].id != NULL)
                ids[n++] = a->resources[r].id;
    }
    qsort(ids, n, sizeof *ids, cmp_str);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || strcmp(ids[m - 1], ids[i]) != 0)
            ids[m++] = ids[i];
    *out = ids;
    *n_out = m;
    return 0;
}

/* A test on a resource reached from the payload: true when it offends. */
typedef bool (*resource_test)(const guard_resource *r, const void *arg);

/* The first offending resource in breadth-first order, so the path to it is a shortest one.
 * Returns its artifact's index and writes *hit, or NO_INDEX. */
static size_t lineage_find(const lineage *lin, resource_test test, const void *arg,
                           const guard_resource **hit)
{
    for (size_t k = 0; k < lin->n_reached; k++) {
        const guard_artifact *a = &lin->anc->items[lin->order[k]];
        for (size_t r = 0; a->resources != NULL && r < a->n_resources; r++) {
            if (test(&a->resources[r], arg)) {
                *hit = &a->resources[r];
                return lin->order[k];
            }
        }
    }
    return NO_INDEX;
}

/* "budget (confidential) → Internal recommendation": the resource, then every artifact from
 * the one above the source up to the payload. The source artifact itself is shown by its
 * resource. */
static void sb_path(strbuf *b, const lineage *lin, size_t item, const guard_resource *r)
{
    sb_put(b, r->id);
    sb_put(b, " (");
    sb_put(b, conf_name(r->conf));
    sb_put(b, ")");
    for (size_t x = lin->prev[item]; x != NO_INDEX; x = lin->prev[x]) {
        sb_put(b, ARROW);
        sb_put(b, artifact_name(&lin->anc->items[x]));
    }
}

static bool resource_outside(const guard_resource *r, const void *arg)
{
    return !strs_has(arg, r->id);
}

static bool resource_above(const guard_resource *r, const void *arg)
{
    return conf_valid(r->conf) && r->conf > *(const int *)arg;
}

/* ---------------------------------------------------------------------------------------- */
/* Provenance and labels                                                                     */
/* ---------------------------------------------------------------------------------------- */

/* The first id of a not in b (both sorted, no NULLs), or NULL. */
static const char *sorted_first_missing(const char **a, size_t na, const char **b, size_t nb)
{
    size_t j = 0;
    for (size_t i = 0; i < na; i++) {
        while (j < nb && strcmp(b[j], a[i]) < 0)
            j++;
        if (j == nb || strcmp(b[j], a[i]) != 0)
            return a[i];
    }
    return NULL;
}

static bool strs_have_null(const guard_strs *l)
{
    if (l->n > 0 && l->items == NULL)
        return true;
    for (size_t i = 0; i < l->n; i++)
        if (l->items[i] == NULL)
            return true;
    return false;
}

/* The DERIVED_FROM parents of a, as a set, must equal its recorded input_ids: the host
 * recorded exactly what was placed in the model request, so a parent outside the inputs is a
 * hidden one and an input without an edge is a missing one. scratch holds parents.n +
 * input_ids.n pointers. */
static void check_parents_are_inputs(const guard_artifact *a, const char **scratch, verdict *v)
{
    const char *id = or_missing(a->id);
    if (strs_have_null(&a->parents) || strs_have_null(&a->input_ids)) {
        flag(v, GUARD_PROVENANCE_INCOMPLETE, id, " has a parent or recorded input without an id",
             END);
        return;
    }
    const char **p = scratch, **in = scratch + a->parents.n;
    for (size_t i = 0; i < a->parents.n; i++)
        p[i] = a->parents.items[i];
    for (size_t i = 0; i < a->input_ids.n; i++)
        in[i] = a->input_ids.items[i];
    qsort(p, a->parents.n, sizeof *p, cmp_str);
    qsort(in, a->input_ids.n, sizeof *in, cmp_str);
    const char *hidden = sorted_first_missing(p, a->parents.n, in, a->input_ids.n);
    if (hidden != NULL)
        flag(v, GUARD_PROVENANCE_INCOMPLETE, id, " is derived from ", hidden,
             ", which is not among its recorded inputs", END);
    const char *unlinked = sorted_first_missing(in, a->input_ids.n, p, a->parents.n);
    if (unlinked != NULL)
        flag(v, GUARD_PROVENANCE_INCOMPLETE, id, " recorded input ", unlinked,
             " has no DERIVED_FROM edge", END);
}

static void check_source(const guard_artifact *a, verdict *v)
{
    char nb[24];
    const char *id = or_missing(a->id);
    if (a->parents.n != 0)
        flag(v, GUARD_PROVENANCE_INCOMPLETE, "source ", id, " is derived from ",
             fmt_size(nb, a->parents.n), " artifact(s)", END);
    if (a->input_ids.n != 0)
        flag(v, GUARD_PROVENANCE_INCOMPLETE, "source ", id, " has recorded inputs", END);
    if (a->n_resources != 1 || a->resources == NULL) {
        flag(v, GUARD_PROVENANCE_INCOMPLETE, "source ", id, " has ",
             fmt_size(nb, a->resources != NULL ? a->n_resources : 0), " resources, not 1", END);
    } else {
        const guard_resource *r = &a->resources[0];
        if (r->id == NULL)
            flag(v, GUARD_PROVENANCE_INCOMPLETE, "the resource of source ", id, " has no id", END);
        if (!conf_valid(r->conf) || !integrity_valid(r->integrity))
            flag(v, GUARD_PROVENANCE_INCOMPLETE, "resource ", r->id, " of ", id,
                 " has no valid labels", END);
    }
    if (a->producers.n > 1)
        flag(v, GUARD_PROVENANCE_INCOMPLETE, id, " has ", fmt_size(nb, a->producers.n),
             " producing contexts", END);
}

static void check_derived(const lineage *lin, const guard_artifact *a, const char **scratch,
                          verdict *v)
{
    char nb[24];
    const char *id = or_missing(a->id);
    if (a->n_resources != 0)
        flag(v, GUARD_PROVENANCE_INCOMPLETE, "derived ", id, " has ", fmt_size(nb, a->n_resources),
             " FROM_RESOURCE edge(s)", END);
    if (a->parents.n == 0)
        flag(v, GUARD_PROVENANCE_INCOMPLETE, "derived ", id, " has no parents", END);
    if (!a->capture_complete)
        flag(v, GUARD_PROVENANCE_INCOMPLETE, id, " capture incomplete", END);
    if (a->producers.n != 1)
        flag(v, GUARD_PROVENANCE_INCOMPLETE, id, " has ", fmt_size(nb, a->producers.n),
             " producing contexts, not 1", END);
    check_parents_are_inputs(a, scratch, v);
    for (size_t j = 0; a->parents.items != NULL && j < a->parents.n; j++)
        if (a->parents.items[j] != NULL && index_find(&lin->ix, a->parents.items[j]) == NO_INDEX)
            flag(v, GUARD_PROVENANCE_INCOMPLETE, "parent ", a->parents.items[j], " of ", id,
                 " missing from the ancestry", END);
}

/*
 * The lineage is complete and well formed: the root is present, every artifact is of run_id,
 * of a known kind, hashed, sources hang from exactly one labelled resource, derived artifacts
 * from exactly their recorded inputs (all present), there is no cycle and nothing unreachable.
 * Then every stored label must equal the recomputed one.
 */
/* RULE-INPUT-PROVENANCE, RULE-DELIVERY-PROVENANCE: the lineage is whole and well formed. */
static int check_lineage(const lineage *lin, const char *run_id, verdict *v)
{
    const guard_ancestry *anc = lin->anc;
    const char *root = or_missing(anc->root);
    if (lin->root == NO_INDEX)
        flag(v, GUARD_PROVENANCE_INCOMPLETE, "payload ", root, " missing from its ancestry", END);
    if (lin->ix.dup != NO_INDEX)
        flag(v, GUARD_PROVENANCE_INCOMPLETE, anc->items[lin->ix.dup].id,
             " listed twice in the ancestry", END);
    size_t scratch_n = 0;
    for (size_t i = 0; i < anc->n; i++) {
        size_t m = anc->items[i].parents.n + anc->items[i].input_ids.n;
        if (m > scratch_n)
            scratch_n = m;
    }
    const char **scratch = alloc_array(scratch_n, sizeof *scratch);
    if (scratch == NULL)
        return -1;
    for (size_t k = 0; k < anc->n; k++) {
        size_t i = lin->order[k];
        const guard_artifact *a = &anc->items[i];
        const char *id = or_missing(a->id);
        if (a->id == NULL)
            flag(v, GUARD_PROVENANCE_INCOMPLETE, "an artifact of the ancestry of ", root,
                 " has no id", END);
        if (!str_eq(a->run_id, run_id))
            flag(v, GUARD_PROVENANCE_INCOMPLETE, id, " is of run ", a->run_id, ", not ", run_id,
                 END);
        if (!hash_valid(a->hash))
            flag(v, GUARD_PROVENANCE_INCOMPLETE, id, " has no valid content hash", END);
        if (!a->kind_known)
            flag(v, GUARD_PROVENANCE_INCOMPLETE, id, " has no known kind", END);
        else if (a->is_source)
            check_source(a, v);
        else
            check_derived(lin, a, scratch, v);
        if (lin->root != NO_INDEX && !lin->reached[i])
            flag(v, GUARD_PROVENANCE_INCOMPLETE, id, " is not reachable from ", root, END);
    }
    free(scratch);
    if (lin->cycle_at != NO_INDEX)
        flag(v, GUARD_PROVENANCE_INCOMPLETE, "DERIVED_FROM cycle through ",
             anc->items[lin->cycle_at].id, END);
    for (size_t k = 0; k < anc->n; k++) {
        size_t i = lin->order[k];
        const guard_artifact *a = &anc->items[i];
        if (lin->conf[i] < 0)
            continue; /* not computable: a provenance code above already says why */
        /* RULE-INPUT-LABELS, RULE-DELIVERY-LABELS: a stored label must equal the recomputed one. */
        if (a->conf != lin->conf[i] || a->integrity != lin->integrity[i])
            flag(v, GUARD_LABEL_MISMATCH, or_missing(a->id), " labelled ", conf_name(a->conf), ", ",
                 integrity_name(a->integrity), "; recomputed ", conf_name(lin->conf[i]), ", ",
                 integrity_name(lin->integrity[i]), END);
    }
    return 0;
}

/*
 * Builds the lineage of anc and checks it. Facts that are absent or cut short (no ancestry,
 * truncated, or the ancestry of another payload) are GRAPH_ERROR and leave *usable false: the
 * lineage checks would only report the gaps of the query. payload may be NULL (input gate).
 * Returns -1 on allocation failure.
 */
static int gather_lineage(lineage *lin, const guard_ancestry *anc, const char *run_id,
                          const char *payload, verdict *v, bool *usable)
{
    char nb[24];
    *usable = false;
    memset(lin, 0, sizeof *lin);
    if (anc == NULL || anc->root == NULL || (anc->n > 0 && anc->items == NULL)) {
        flag(v, GUARD_GRAPH_ERROR, "no ancestry facts", END);
        return 0;
    }
    if (payload != NULL && !str_eq(anc->root, payload)) {
        flag(v, GUARD_GRAPH_ERROR, "ancestry facts are of ", anc->root, ", not of the payload ",
             payload, END);
        return 0;
    }
    if (anc->truncated) {
        flag(v, GUARD_GRAPH_ERROR, "ancestry of ", anc->root, " truncated after ",
             fmt_size(nb, anc->n), " artifacts", END);
        return 0;
    }
    if (lineage_build(lin, anc, anc->root) < 0 || check_lineage(lin, run_id, v) < 0)
        return -1;
    *usable = true;
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Context and delegation chain                                                              */
/* ---------------------------------------------------------------------------------------- */

/* The acting context must be of this run and this step, and owned by the step's actor alone. */
static void check_context(const guard_stepcap *cap, const guard_context *ctx, const char *run_id,
                          verdict *v)
{
    const char *cid = or_missing(ctx->id);
    /* RULE-INPUT-STEP, RULE-DELIVERY-STEP: the context is of this run and this step. */
    if (!str_eq(ctx->run_id, run_id))
        flag(v, GUARD_STEP_MISMATCH, "context ", cid, " is of run ", ctx->run_id, ", not ", run_id,
             END);
    if (!str_eq(ctx->step, cap->step))
        flag(v, GUARD_STEP_MISMATCH, "context ", cid, " is of step ", ctx->step, ", not ",
             cap->step, END);
    /* RULE-INPUT-IDENTITY, RULE-DELIVERY-IDENTITY: owned by the step's actor alone. */
    bool owned = ctx->owners.n > 0 && ctx->owners.items != NULL;
    for (size_t i = 0; owned && i < ctx->owners.n; i++)
        owned = str_eq(ctx->owners.items[i], cap->actor);
    strbuf b;
    if (!owned && flag_begin(v, GUARD_IDENTITY_MISMATCH, &b)) {
        sb_put(&b, "context ");
        sb_put(&b, cid);
        sb_put(&b, " is owned by ");
        sb_strs(&b, &ctx->owners);
        sb_put(&b, ", not ");
        sb_put(&b, cap->actor);
        flag_end(v, GUARD_IDENTITY_MISMATCH, &b);
    }
}

/* One grant's own validity: unrevoked and valid_from <= now < valid_to (a NaN fails). */
static void check_grant_time(const guard_grant *g, double now, verdict *v)
{
    const char *id = or_missing(g->id);
    /* RULE-CHAIN-REVOCATION: no grant on the chain revoked. */
    if (g->revoked_at > 0 || g->revoked_at != g->revoked_at)
        flag(v, GUARD_GRANT_INVALID, id, " revoked", END);
    /* RULE-CHAIN-EXPIRY: valid_from <= now < valid_to. */
    if (!(now >= g->valid_from))
        flag(v, GUARD_GRANT_INVALID, id, " not yet valid", END);
    if (!(now < g->valid_to))
        flag(v, GUARD_GRANT_INVALID, id, " expired", END);
}

/* RULE-CHAIN-HUMAN-ROOT: a root must stand alone and be issued by exactly one human. */
static void check_root(const guard_grant *g, verdict *v)
{
    char nb[24];
    const char *id = or_missing(g->id);
    if (g->parents.n != 0)
        flag(v, GUARD_GRANT_INVALID, "root ", id, " is delegated from ",
             g->parents.items != NULL ? g->parents.items[0] : NULL, END);
    if (g->n_issuers != 1 || g->issuers == NULL)
        flag(v, GUARD_GRANT_INVALID, "root ", id, " has ",
             fmt_size(nb, g->issuers != NULL ? g->n_issuers : 0), " issuers, not 1", END);
    else if (!str_eq(g->issuers[0].kind, "human"))
        flag(v, GUARD_GRANT_INVALID, "root ", id, " issued by ", g->issuers[0].id, " (",
             g->issuers[0].kind, "), not a human", END);
}

/*
 * Walks chain from its leaf up to a root (see guard_check_chain). *walked receives the grants
 * met, leaf first (item indices, caller frees); *n_walked their count. The walk stops at the
 * root or at the first structural fault (branch, cycle, missing parent, no parent); time and
 * revocation faults are collected and the walk goes on, so every grant is judged.
 * Returns -1 on allocation failure.
 */
static int walk_chain(const guard_chain *chain, const char *actor, double now, verdict *v,
                      size_t **walked, size_t *n_walked)
{
    char nb[24];
    *walked = NULL;
    *n_walked = 0;
    if (chain == NULL || (chain->n > 0 && chain->items == NULL)) {
        flag(v, GUARD_GRAPH_ERROR, "no grant chain facts", END);
        return 0;
    }
    size_t n = chain->n;
    const char **keys = alloc_array(n, sizeof *keys);
    size_t *path = alloc_array(n, sizeof *path);
    bool *seen = alloc_array(n, sizeof *seen);
    id_index ix = {0};
    int rc = -1;
    if (keys == NULL || path == NULL || seen == NULL)
        goto out;
    for (size_t i = 0; i < n; i++)
        keys[i] = chain->items[i].id;
    if (index_build(&ix, keys, n) < 0)
        goto out;
    if (ix.dup != NO_INDEX)
        flag(v, GUARD_GRANT_INVALID, keys[ix.dup], " listed twice in the chain", END);
    size_t cur = index_find(&ix, chain->leaf);
    if (cur == NO_INDEX) {
        flag(v, GUARD_GRANT_NOT_FOUND, "grant ", chain->leaf, " not found", END);
        rc = 0;
        goto out;
    }
    const guard_grant *leaf = &chain->items[cur];
    /* RULE-CHAIN-GRANTEE: the leaf is granted to the actor alone. */
    bool mine = leaf->n_grantees > 0 && leaf->grantees != NULL;
    for (size_t i = 0; mine && i < leaf->n_grantees; i++)
        mine = str_eq(leaf->grantees[i].id, actor);
    strbuf b;
    if (!mine && flag_begin(v, GUARD_IDENTITY_MISMATCH, &b)) {
        sb_put(&b, leaf->id);
        sb_put(&b, " is granted to ");
        sb_actors(&b, leaf->grantees, leaf->grantees != NULL ? leaf->n_grantees : 0);
        sb_put(&b, ", not ");
        sb_put(&b, actor);
        flag_end(v, GUARD_IDENTITY_MISMATCH, &b);
    }
    size_t len = 0;
    for (;;) {
        const guard_grant *g = &chain->items[cur];
        const char *id = or_missing(g->id);
        /* RULE-CHAIN-CYCLE: no grant met twice on the walk up. */
        if (seen[cur]) {
            flag(v, GUARD_GRANT_INVALID, "delegation cycle at ", id, END);
            break;
        }
        seen[cur] = true;
        path[len++] = cur;
        check_grant_time(g, now, v);
        if (g->root) {
            check_root(g, v);
            break;
        }
        /* RULE-CHAIN-BRANCH: one parent per non-root grant, present. */
        if (g->parents.n == 0 || g->parents.items == NULL) {
            flag(v, GUARD_GRANT_INVALID, id, " has no parent and is not a root", END);
            break;
        }
        if (g->parents.n > 1) {
            flag(v, GUARD_GRANT_INVALID, id, " is delegated from ", fmt_size(nb, g->parents.n),
                 " grants (branched)", END);
            break;
        }
        size_t up = index_find(&ix, g->parents.items[0]);
        if (up == NO_INDEX) {
            flag(v, GUARD_GRANT_INVALID, "parent ", g->parents.items[0], " of ", id,
                 " missing from the chain", END);
            break;
        }
        cur = up;
    }
    *walked = path;
    *n_walked = len;
    path = NULL;
    rc = 0;
out:
    index_free(&ix);
    free(keys);
    free(path);
    free(seen);
    return rc;
}

static int chain_ids(const guard_chain *chain, const size_t *walked, size_t n, const char ***out)
{
    *out = alloc_array(n, sizeof **out);
    if (*out == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        (*out)[i] = chain->items[walked[i]].id;
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Public API                                                                                */
/* ---------------------------------------------------------------------------------------- */

int guard_recompute_labels(const guard_ancestry *anc, const char *id, int *conf, int *integrity)
{
    if (anc == NULL || id == NULL || conf == NULL || integrity == NULL ||
        (anc->n > 0 && anc->items == NULL))
        return -1;
    lineage lin;
    int rc = -1;
    if (lineage_build(&lin, anc, id) == 0 && lin.root != NO_INDEX && lin.conf[lin.root] >= 0) {
        *conf = lin.conf[lin.root];
        *integrity = lin.integrity[lin.root];
        rc = 0;
    }
    lineage_free(&lin);
    return rc;
}

int guard_check_input(const guard_stepcap *cap, const guard_context *ctx, const char *run_id,
                      const guard_ancestry *anc, guard_decision *out)
{
    verdict v = {0};
    lineage lin = {0};
    bool usable = false;
    const char **sources = NULL;
    size_t n_sources = 0;
    int rc;
    if (out == NULL)
        return -1;
    memset(out, 0, sizeof *out);
    if (cap == NULL || ctx == NULL || run_id == NULL) {
        flag(&v, GUARD_GRAPH_ERROR, "no step, context or run facts", END);
        goto finish;
    }
    check_context(cap, ctx, run_id, &v);
    if (gather_lineage(&lin, anc, run_id, NULL, &v, &usable) < 0)
        goto oom;
    if (usable) {
        const guard_resource *r = NULL;
        size_t at = lineage_find(&lin, resource_outside, &cap->resources, &r);
        strbuf b;
        /* RULE-INPUT-SCOPE: every source of the ancestry is one of the step's resources. */
        if (at != NO_INDEX && flag_begin(&v, GUARD_INPUT_OUT_OF_SCOPE, &b)) {
            sb_path(&b, &lin, at, r);
            sb_put(&b, ARROW);
            sb_put(&b, cap->step);
            sb_put(&b, " step ");
            sb_strs(&b, &cap->resources);
            flag_end(&v, GUARD_INPUT_OUT_OF_SCOPE, &b);
        }
        if (lineage_sources(&lin, &sources, &n_sources) < 0)
            goto oom;
    }
finish:
    rc = verdict_finish(&v, out, NULL, 0, sources, n_sources);
    free(sources);
    lineage_free(&lin);
    return rc;
oom:
    free(sources);
    lineage_free(&lin);
    return fail_oom(&v, out);
}

/* The payload of a summary as a witness names it: its title, or its id when untitled. */
static const char *summary_name(const guard_summary *s)
{
    return s->now_title != NULL && s->now_title[0] != '\0' ? s->now_title : or_missing(s->id);
}

/* RULE-INPUT-SUMMARY: whether a summary may be decided from; when not, flags GRAPH_ERROR with
 * why: charterd's reason when it marked it (no summary, no seal, a seal that does not verify),
 * else its text does not hash to its summary_hash. No allow ever comes from an unverified
 * summary. */
static bool summary_usable(const guard_summary *s, verdict *v)
{
    if (s != NULL && s->verified && (s->n_sources == 0 || s->sources != NULL))
        return true;
    if (s != NULL && s->unverified != NULL && s->unverified[0] != '\0')
        flag(v, GUARD_GRAPH_ERROR, s->unverified, END);
    else
        flag(v, GUARD_GRAPH_ERROR, "the lineage summary of ", s ? or_missing(s->id) : "(missing)",
             " does not hash to its summary_hash", END);
    return false;
}

static bool strs_equal(const guard_strs *a, const guard_strs *b)
{
    if (a->n != b->n || strs_have_null(a) || strs_have_null(b))
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->items[i], b->items[i]) != 0)
            return false;
    return true;
}

/* RULE-INPUT-QUARANTINE: no source the summary names is quarantined now (its current state,
 * read with its labels: the cost does not grow with the lineage's depth). The witness names
 * the resource, when and why it was quarantined, and the artifact derived from it. Facts
 * recorded before quarantines were read carry none, and decide as they did. */
static void check_quarantine(const guard_summary *s, verdict *v)
{
    for (size_t i = 0; i < s->n_now_sources; i++) {
        const guard_resource *r = &s->now_sources[i];
        if (r->quarantined_at == NULL || r->quarantined_at[0] == '\0')
            continue;
        strbuf b;
        if (!flag_begin(v, GUARD_RESOURCE_QUARANTINED, &b))
            return;
        sb_put(&b, "resource ");
        sb_put(&b, or_missing(r->id));
        sb_put(&b, " quarantined at ");
        sb_put(&b, r->quarantined_at);
        if (r->quarantined != NULL && r->quarantined[0] != '\0') {
            sb_put(&b, " (");
            sb_put(&b, r->quarantined);
            sb_put(&b, ")");
        }
        if (!str_eq(s->kind, "source")) {
            sb_put(&b, ARROW);
            sb_put(&b, summary_name(s));
        }
        flag_end(v, GUARD_RESOURCE_QUARANTINED, &b);
        return;
    }
}

/* RULE-INPUT-PROVENANCE, RULE-INPUT-LABELS from a summary: what was derived at creation, the
 * artifact's own edges compared with it, and the sources' labels now. */
static void check_summary(const guard_summary *s, const char *run_id, verdict *v)
{
    const char *id = or_missing(s->id);
    if (!str_eq(s->run_id, run_id))
        flag(v, GUARD_PROVENANCE_INCOMPLETE, id, " is of run ", s->run_id, ", not ", run_id, END);
    if (!str_eq(s->now_run_id, s->run_id) || !str_eq(s->now_kind, s->kind))
        flag(v, GUARD_PROVENANCE_INCOMPLETE, id, " is no longer the ", s->kind, " artifact of run ",
             s->run_id, " its summary names", END);
    if (!hash_valid(s->now_hash))
        flag(v, GUARD_PROVENANCE_INCOMPLETE, id, " has no valid content hash", END);
    /* The content is the one the summary was made for: its bytes and hash swapped behind the
     * API's back are refused here, not only by audit. */
    else if (s->hash != NULL && s->hash[0] != '\0' && !str_eq(s->now_hash, s->hash))
        flag(v, GUARD_PROVENANCE_INCOMPLETE, id,
             "'s content hash is not the one its lineage summary names", END);
    /* The payload's own edges must be the ones its summary was derived from: deleting them
     * turns a decision around, as deleting any edge of the ancestry did before. */
    if (!strs_equal(&s->now_parents, &s->parents))
        flag(v, GUARD_PROVENANCE_INCOMPLETE, id,
             "'s DERIVED_FROM edges are not the parents its lineage summary names", END);
    bool source = str_eq(s->kind, "source");
    bool one = s->now_resources.n == 1 && !strs_have_null(&s->now_resources) &&
               str_eq(s->now_resources.items[0], s->resource);
    if (source ? !one : s->now_resources.n != 0)
        flag(v, GUARD_PROVENANCE_INCOMPLETE, id,
             "'s FROM_RESOURCE edges are not the ones its lineage summary names", END);
    if (source ? s->now_producers.n > 1 : s->now_producers.n != 1) {
        char nb[24];
        flag(v, GUARD_PROVENANCE_INCOMPLETE, id, " has ", fmt_size(nb, s->now_producers.n),
             " producing contexts", END);
    }
    if (!s->ok)
        flag(v,
             str_eq(s->code, "LABEL_MISMATCH") ? GUARD_LABEL_MISMATCH : GUARD_PROVENANCE_INCOMPLETE,
             s->why != NULL && s->why[0] ? s->why : "the lineage summary records a failed rule",
             END);
    if (s->conf >= 0 && (s->now_conf != s->conf || s->now_integrity != s->integrity))
        flag(v, GUARD_LABEL_MISMATCH, id, " labelled ", conf_name(s->now_conf), ", ",
             integrity_name(s->now_integrity), "; recomputed ", conf_name(s->conf), ", ",
             integrity_name(s->integrity), END);
    if (s->n_now_sources != s->n_sources) {
        flag(v, GUARD_GRAPH_ERROR, "the sources of ", id, " could not be read", END);
        return;
    }
    for (size_t i = 0; i < s->n_sources; i++) {
        const guard_resource *was = &s->sources[i], *now = &s->now_sources[i];
        if (!str_eq(was->id, now->id) || !conf_valid(now->conf) || !integrity_valid(now->integrity))
            flag(v, GUARD_GRAPH_ERROR, "the labels of resource ", was->id, " could not be read",
                 END);
        else if (was->conf != now->conf || was->integrity != now->integrity)
            flag(v, GUARD_LABEL_MISMATCH, "resource ", was->id, " was ", conf_name(was->conf), ", ",
                 integrity_name(was->integrity), " when ", id, " was derived; now ",
                 conf_name(now->conf), ", ", integrity_name(now->integrity), END);
    }
    check_quarantine(s, v);
}

int guard_check_input_summary(const guard_stepcap *cap, const guard_context *ctx,
                              const char *run_id, const guard_summary *s, guard_decision *out)
{
    verdict v = {0};
    const char **sources = NULL;
    size_t n_sources = 0;
    if (out == NULL)
        return -1;
    memset(out, 0, sizeof *out);
    if (cap == NULL || ctx == NULL || run_id == NULL) {
        flag(&v, GUARD_GRAPH_ERROR, "no step, context or run facts", END);
        return verdict_finish(&v, out, NULL, 0, NULL, 0);
    }
    check_context(cap, ctx, run_id, &v);
    if (!summary_usable(s, &v))
        return verdict_finish(&v, out, NULL, 0, NULL, 0);
    check_summary(s, run_id, &v);
    /* RULE-INPUT-SCOPE: every source the summary names is one of the step's resources. */
    for (size_t i = 0; i < s->n_sources; i++) {
        const guard_resource *r = &s->sources[i];
        strbuf b;
        if (!strs_has(&cap->resources, r->id) && flag_begin(&v, GUARD_INPUT_OUT_OF_SCOPE, &b)) {
            sb_put(&b, r->id);
            sb_put(&b, " (");
            sb_put(&b, conf_name(r->conf));
            sb_put(&b, ")");
            if (!str_eq(s->kind, "source")) {
                sb_put(&b, ARROW);
                sb_put(&b, summary_name(s));
            }
            sb_put(&b, ARROW);
            sb_put(&b, cap->step);
            sb_put(&b, " step ");
            sb_strs(&b, &cap->resources);
            flag_end(&v, GUARD_INPUT_OUT_OF_SCOPE, &b);
        }
    }
    if (s->n_sources > 0) {
        sources = alloc_array(s->n_sources, sizeof *sources);
        if (sources == NULL)
            return fail_oom(&v, out);
        for (size_t i = 0; i < s->n_sources; i++)
            sources[n_sources++] = s->sources[i].id;
    }
    int rc = verdict_finish(&v, out, NULL, 0, sources, n_sources);
    free(sources);
    return rc;
}

/* The request as the server resolved it must be one the step allows. */
static bool check_request(const guard_stepcap *cap, const guard_delivery_request *req, verdict *v)
{
    strbuf b;
    /* RULE-DELIVERY-TOOL: a tool declared with arguments is invoked (Gate/Invoke checks each
     * value against its role), never sent a payload through: refused alone. */
    if (req->live_tool) {
        flag(v, GUARD_TOOL_NOT_PERMITTED, "tool ", req->tool,
             " declares arguments in the workflow: it is invoked with Gate/Invoke, never "
             "delivered to",
             END);
        return true;
    }
    /* RULE-DELIVERY-STEP: the tool, the recipient and the grant are the step's. */
    if (!strs_has(&cap->tools, req->tool) && flag_begin(v, GUARD_STEP_MISMATCH, &b)) {
        sb_put(&b, "tool ");
        sb_put(&b, req->tool);
        sb_put(&b, " outside the ");
        sb_put(&b, cap->step);
        sb_put(&b, " step ");
        sb_strs(&b, &cap->tools);
        flag_end(v, GUARD_STEP_MISMATCH, &b);
    }
    if (!strs_has(&cap->recipients, req->recipient) && flag_begin(v, GUARD_STEP_MISMATCH, &b)) {
        sb_put(&b, "recipient ");
        sb_put(&b, req->recipient);
        sb_put(&b, " outside the ");
        sb_put(&b, cap->step);
        sb_put(&b, " step ");
        sb_strs(&b, &cap->recipients);
        flag_end(v, GUARD_STEP_MISMATCH, &b);
    }
    if (!str_eq(req->grant, cap->grant))
        flag(v, GUARD_STEP_MISMATCH, "grant ", req->grant, " is not the ", cap->step,
             " step's grant ", cap->grant, END);
    return false;
}

/* Every grant of the chain must cover the tool, the recipient and the payload's sources. */
/* The payload's sources, from a walked lineage or from its summary. */
typedef struct {
    const lineage *lin;       /* usable walked lineage, or NULL */
    const guard_summary *sum; /* verified summary, or NULL */
} source_view;

/* The first source r of the view that passes test (*hit), and where (returned; NO_INDEX for
 * none). */
static size_t view_find(const source_view *sv, resource_test test, const void *arg,
                        const guard_resource **hit)
{
    if (sv->lin != NULL)
        return lineage_find(sv->lin, test, arg, hit);
    for (size_t i = 0; sv->sum != NULL && i < sv->sum->n_sources; i++)
        if (test(&sv->sum->sources[i], arg)) {
            *hit = &sv->sum->sources[i];
            return i;
        }
    return NO_INDEX;
}

/* The witness's path to the source at found by view_find: the whole path from a walk, "R
 * (label) → payload" from a summary (the gate walks for the full path on its deny path). */
static void view_path(strbuf *b, const source_view *sv, size_t at, const guard_resource *r)
{
    if (sv->lin != NULL) {
        sb_path(b, sv->lin, at, r);
        return;
    }
    sb_put(b, r->id);
    sb_put(b, " (");
    sb_put(b, conf_name(r->conf));
    sb_put(b, ")");
    if (!str_eq(sv->sum->kind, "source")) {
        sb_put(b, ARROW);
        sb_put(b, summary_name(sv->sum));
    }
}

static void check_chain_coverage(const guard_chain *chain, const size_t *walked, size_t n,
                                 const guard_delivery_request *req, const source_view *sv,
                                 bool usable, verdict *v)
{
    for (size_t i = 0; i < n; i++) {
        const guard_grant *g = &chain->items[walked[i]];
        const char *id = or_missing(g->id);
        /* RULE-CHAIN-COVERAGE: each grant lists the tool and the recipient. */
        if (!strs_has(&g->tools, req->tool))
            flag(v, GUARD_GRANT_INVALID, id, " does not cover tool ", req->tool, END);
        if (!strs_has(&g->recipients, req->recipient))
            flag(v, GUARD_GRANT_INVALID, id, " does not cover recipient ", req->recipient, END);
        if (!usable)
            continue;
        const guard_resource *r = NULL;
        size_t at = view_find(sv, resource_outside, &g->resources, &r);
        strbuf b;
        /* RULE-DELIVERY-SCOPE: every source is one of each grant's resources. */
        if (at != NO_INDEX && flag_begin(v, GUARD_RESOURCE_OUT_OF_SCOPE, &b)) {
            view_path(&b, sv, at, r);
            sb_put(&b, ARROW "grant ");
            sb_put(&b, id);
            sb_put(&b, " ");
            sb_strs(&b, &g->resources);
            flag_end(v, GUARD_RESOURCE_OUT_OF_SCOPE, &b);
        }
    }
}

int guard_check_delivery(const guard_stepcap *cap, const guard_context *ctx,
                         const guard_delivery_request *req, const guard_ancestry *anc,
                         const guard_chain *chain, double now, guard_decision *out)
{
    verdict v = {0};
    lineage lin = {0};
    bool usable = false;
    size_t *walked = NULL, n_walked = 0, n_sources = 0;
    const char **order = NULL, **sources = NULL;
    int rc;
    if (out == NULL)
        return -1;
    memset(out, 0, sizeof *out);
    if (cap == NULL || ctx == NULL || req == NULL) {
        flag(&v, GUARD_GRAPH_ERROR, "no step, context or request facts", END);
        goto finish;
    }
    if (check_request(cap, req, &v))
        goto finish;
    check_context(cap, ctx, req->run_id, &v);
    int clearance = req->recipient_clearance;
    if (!conf_valid(clearance))
        flag(&v, GUARD_GRAPH_ERROR, "recipient ", req->recipient, " has no clearance", END);
    source_view sv = {NULL, NULL};
    const guard_summary *sum = req->summary;
    if (sum != NULL) {
        /* RULE-DELIVERY-PROVENANCE, RULE-DELIVERY-LABELS from the payload's summary. */
        bool decidable = summary_usable(sum, &v);
        if (decidable && !str_eq(sum->id, req->payload_id)) {
            flag(&v, GUARD_GRAPH_ERROR, "lineage summary facts are of ", sum->id,
                 ", not of the payload ", req->payload_id, END);
        } else if (decidable) {
            check_summary(sum, req->run_id, &v);
            sv.sum = sum;
            usable = true;
        }
    } else {
        if (gather_lineage(&lin, anc, req->run_id, req->payload_id, &v, &usable) < 0)
            goto oom;
        if (usable)
            sv.lin = &lin;
    }
    if (usable) {
        const guard_resource *r = NULL;
        size_t at =
            conf_valid(clearance) ? view_find(&sv, resource_above, &clearance, &r) : NO_INDEX;
        strbuf b;
        /* RULE-DELIVERY-CLEARANCE: no source above the recipient's clearance. */
        if (at != NO_INDEX && flag_begin(&v, GUARD_CLEARANCE_EXCEEDED, &b)) {
            view_path(&b, &sv, at, r);
            sb_put(&b, ARROW);
            sb_put(&b, req->recipient);
            sb_put(&b, " (clearance ");
            sb_put(&b, conf_name(clearance));
            sb_put(&b, ")");
            flag_end(&v, GUARD_CLEARANCE_EXCEEDED, &b);
        }
        at = view_find(&sv, resource_outside, &cap->resources, &r);
        /* RULE-DELIVERY-SCOPE: every source is one of the step's resources. */
        if (at != NO_INDEX && flag_begin(&v, GUARD_RESOURCE_OUT_OF_SCOPE, &b)) {
            view_path(&b, &sv, at, r);
            sb_put(&b, ARROW);
            sb_put(&b, cap->step);
            sb_put(&b, " step ");
            sb_strs(&b, &cap->resources);
            flag_end(&v, GUARD_RESOURCE_OUT_OF_SCOPE, &b);
        }
        if (sv.lin != NULL && lineage_sources(&lin, &sources, &n_sources) < 0)
            goto oom;
        if (sv.sum != NULL && sum->n_sources > 0) {
            if ((sources = alloc_array(sum->n_sources, sizeof *sources)) == NULL)
                goto oom;
            for (size_t i = 0; i < sum->n_sources; i++)
                sources[n_sources++] = sum->sources[i].id;
        }
    }
    if (chain != NULL && !str_eq(chain->leaf, req->grant)) {
        flag(&v, GUARD_GRAPH_ERROR, "grant chain facts are of ", chain->leaf, ", not of ",
             req->grant, END);
    } else {
        if (walk_chain(chain, cap->actor, now, &v, &walked, &n_walked) < 0)
            goto oom;
        check_chain_coverage(chain, walked, n_walked, req, &sv, usable, &v);
        if (chain_ids(chain, walked, n_walked, &order) < 0)
            goto oom;
    }
finish:
    rc = verdict_finish(&v, out, order, n_walked, sources, n_sources);
    free(walked);
    free(order);
    free(sources);
    lineage_free(&lin);
    return rc;
oom:
    free(walked);
    free(order);
    free(sources);
    lineage_free(&lin);
    return fail_oom(&v, out);
}

/* ---------------------------------------------------------------------------------------- */
/* Tool invocations                                                                          */
/* ---------------------------------------------------------------------------------------- */

/* The tool must be a declared live tool among the step's tools. True when it is. */
static bool check_invoke_tool(const guard_stepcap *cap, const guard_invoke_request *req, verdict *v)
{
    /* RULE-INVOKE-TOOL: only a tool the step lists and the workflow declares with its
     * arguments' roles is invoked; a role is never guessed. */
    strbuf b;
    if (!strs_has(&cap->tools, req->tool) && flag_begin(v, GUARD_TOOL_NOT_PERMITTED, &b)) {
        sb_put(&b, "tool ");
        sb_put(&b, or_missing(req->tool));
        sb_put(&b, " is not among the ");
        sb_put(&b, cap->step);
        sb_put(&b, " step's tools ");
        sb_strs(&b, &cap->tools);
        flag_end(v, GUARD_TOOL_NOT_PERMITTED, &b);
    } else if (!req->declared) {
        flag(v, GUARD_TOOL_NOT_PERMITTED, "tool ", or_missing(req->tool),
             " declares no arguments in the workflow: only a tool whose arguments have roles is "
             "invoked",
             END);
    }
    return v->codes == 0;
}

/* Whether req is decided by the rules of GUARD_INVOKE_EVERY_ARGUMENT or later: every value,
 * control or data, is held to the clearance of where it is sent (a control value is sent to
 * the same place as the data: an address, a path, a folder name). */
static bool invoke_every_argument(const guard_invoke_request *req)
{
    return req->version == 0 || req->version >= GUARD_INVOKE_EVERY_ARGUMENT;
}

/* Whether argument a's value is held to req->clearance: every value under
 * invoke_every_argument, only a data value before. */
static bool invoke_value_cleared(const guard_invoke_request *req, const guard_invoke_arg *a)
{
    return !a->control || invoke_every_argument(req);
}

/* The destination argument's value must match a destination class the step lists; a tool
 * without one is held to its own clearance, which must be known. */
static void check_invoke_destination(const guard_stepcap *cap, const guard_invoke_request *req,
                                     verdict *v)
{
    if (req->destination_arg == NULL) {
        if (invoke_every_argument(req) && !conf_valid(req->clearance))
            flag(v, GUARD_GRAPH_ERROR, "tool ", or_missing(req->tool), " has no clearance", END);
        return;
    }
    /* RULE-INVOKE-DESTINATION: a value no class stands for is refused, never defaulted. */
    if (req->destination == NULL) {
        flag(v, GUARD_RECIPIENT_UNKNOWN, "argument ", req->destination_arg, " = \"",
             or_missing(req->destination_value), "\" matches no destination class", END);
        return;
    }
    strbuf b;
    if (!strs_has(&cap->recipients, req->destination) && flag_begin(v, GUARD_STEP_MISMATCH, &b)) {
        sb_put(&b, "destination class ");
        sb_put(&b, req->destination);
        sb_put(&b, " is not among the ");
        sb_put(&b, cap->step);
        sb_put(&b, " step's recipients ");
        sb_strs(&b, &cap->recipients);
        flag_end(v, GUARD_STEP_MISMATCH, &b);
    }
    if (!conf_valid(req->clearance))
        flag(v, GUARD_GRAPH_ERROR, "destination class ", req->destination, " has no clearance",
             END);
}

/* "argument <name> ← <path to the source r of s>" into b. */
static void sb_argument_path(strbuf *b, const guard_invoke_arg *a, const guard_summary *s,
                             size_t at, const guard_resource *r)
{
    source_view sv = {NULL, s};
    sb_put(b, "argument ");
    sb_put(b, or_missing(a->name));
    sb_put(b, " \xe2\x86\x90 ");
    view_path(b, &sv, at, r);
}

static bool resource_untrusted(const guard_resource *r, const void *arg)
{
    (void)arg;
    return r->integrity != GUARD_INTEGRITY_TRUSTED;
}

/* RULE-INVOKE-CLEARANCE: no source of a's value s above the clearance of where it is sent,
 * the destination class or, for a tool without a destination argument, the tool. */
static void check_invoke_clearance(const guard_invoke_request *req, const guard_invoke_arg *a,
                                   const guard_summary *s, verdict *v)
{
    source_view sv = {NULL, s};
    const guard_resource *r = NULL;
    strbuf b;
    int clearance = req->clearance;
    size_t at = invoke_value_cleared(req, a) && conf_valid(clearance)
                    ? view_find(&sv, resource_above, &clearance, &r)
                    : NO_INDEX;
    if (at == NO_INDEX || !flag_begin(v, GUARD_CLEARANCE_EXCEEDED, &b))
        return;
    sb_argument_path(&b, a, s, at, r);
    sb_put(&b, ARROW);
    if (req->destination_arg == NULL)
        sb_put(&b, "tool ");
    sb_put(&b, or_missing(req->destination_arg == NULL ? req->tool : req->destination));
    sb_put(&b, " (clearance ");
    sb_put(&b, conf_name(clearance));
    sb_put(&b, ")");
    flag_end(v, GUARD_CLEARANCE_EXCEEDED, &b);
}

/* One value's lineage summary s under its argument's role: RULE-INVOKE-CONTROL (a control
 * value is trusted), RULE-INVOKE-CLEARANCE (check_invoke_clearance), RULE-INVOKE-SCOPE (every
 * source is one of the step's resources). */
static void check_invoke_value(const guard_stepcap *cap, const guard_invoke_request *req,
                               const guard_invoke_arg *a, const guard_summary *s, verdict *v)
{
    source_view sv = {NULL, s};
    const guard_resource *r = NULL;
    strbuf b;
    size_t at = view_find(&sv, resource_untrusted, NULL, &r);
    if (a->control && (at != NO_INDEX || s->integrity != GUARD_INTEGRITY_TRUSTED) &&
        flag_begin(v, GUARD_CONTROL_UNTRUSTED, &b)) {
        sb_put(&b, "argument ");
        sb_put(&b, or_missing(a->name));
        sb_put(&b, " \xe2\x86\x90 ");
        if (at != NO_INDEX) {
            sb_put(&b, r->id);
            sb_put(&b, " (");
            sb_put(&b, integrity_name(r->integrity));
            sb_put(&b, ")");
            if (!str_eq(s->kind, "source")) {
                sb_put(&b, ARROW);
                sb_put(&b, summary_name(s));
            }
        } else {
            sb_put(&b, summary_name(s));
        }
        sb_put(&b, ": a control argument must be trusted");
        flag_end(v, GUARD_CONTROL_UNTRUSTED, &b);
    }
    check_invoke_clearance(req, a, s, v);
    at = view_find(&sv, resource_outside, &cap->resources, &r);
    if (at != NO_INDEX && flag_begin(v, GUARD_RESOURCE_OUT_OF_SCOPE, &b)) {
        sb_argument_path(&b, a, s, at, r);
        sb_put(&b, ARROW);
        sb_put(&b, cap->step);
        sb_put(&b, " step ");
        sb_strs(&b, &cap->resources);
        flag_end(v, GUARD_RESOURCE_OUT_OF_SCOPE, &b);
    }
}

/* Every argument's lineage: each summary usable and sound (as the input gate reads it), then
 * its value under its role. The data arguments' sources go into *sources (borrowed, each
 * once; *n of them; the caller frees the array). Returns 0, or -1 when memory ran out. */
static int check_invoke_values(const guard_stepcap *cap, const guard_invoke_request *req,
                               verdict *v, const char ***sources, size_t *n)
{
    size_t cap_n = 0;
    for (size_t i = 0; i < req->n_args; i++)
        for (size_t k = 0; !req->args[i].control && k < req->args[i].n_lineage; k++)
            cap_n += req->args[i].lineage[k] != NULL ? req->args[i].lineage[k]->n_sources : 0;
    *sources = cap_n > 0 ? alloc_array(cap_n, sizeof **sources) : NULL;
    *n = 0;
    if (cap_n > 0 && *sources == NULL)
        return -1;
    for (size_t i = 0; i < req->n_args; i++) {
        const guard_invoke_arg *a = &req->args[i];
        for (size_t k = 0; k < a->n_lineage; k++) {
            const guard_summary *s = a->lineage[k];
            if (!summary_usable(s, v))
                continue;
            check_summary(s, req->run_id, v);
            check_invoke_value(cap, req, a, s, v);
            for (size_t j = 0; !a->control && j < s->n_sources; j++) {
                bool seen = false;
                for (size_t m = 0; m < *n && !seen; m++)
                    seen = str_eq((*sources)[m], s->sources[j].id);
                if (!seen)
                    (*sources)[(*n)++] = s->sources[j].id;
            }
        }
    }
    return 0;
}

/* RULE-CHAIN-COVERAGE for an invocation: each grant lists the tool, the destination class and
 * every source of the data arguments. */
static void check_invoke_coverage(const guard_chain *chain, const size_t *walked, size_t n,
                                  const guard_invoke_request *req, const char *const *sources,
                                  size_t n_sources, verdict *v)
{
    for (size_t i = 0; i < n; i++) {
        const guard_grant *g = &chain->items[walked[i]];
        const char *id = or_missing(g->id);
        if (!strs_has(&g->tools, req->tool))
            flag(v, GUARD_GRANT_INVALID, id, " does not cover tool ", req->tool, END);
        if (req->destination != NULL && !strs_has(&g->recipients, req->destination))
            flag(v, GUARD_GRANT_INVALID, id, " does not cover destination class ", req->destination,
                 END);
        for (size_t k = 0; k < n_sources; k++) {
            strbuf b;
            if (!strs_has(&g->resources, sources[k]) &&
                flag_begin(v, GUARD_RESOURCE_OUT_OF_SCOPE, &b)) {
                sb_put(&b, sources[k]);
                sb_put(&b, ARROW "grant ");
                sb_put(&b, id);
                sb_put(&b, " ");
                sb_strs(&b, &g->resources);
                flag_end(v, GUARD_RESOURCE_OUT_OF_SCOPE, &b);
            }
        }
    }
}

int guard_check_invoke(const guard_stepcap *cap, const guard_context *ctx,
                       const guard_invoke_request *req, const guard_chain *chain, double now,
                       guard_decision *out)
{
    verdict v = {0};
    size_t *walked = NULL, n_walked = 0, n_sources = 0;
    const char **order = NULL, **sources = NULL;
    if (out == NULL)
        return -1;
    memset(out, 0, sizeof *out);
    if (cap == NULL || ctx == NULL || req == NULL)
        flag(&v, GUARD_GRAPH_ERROR, "no step, context or request facts", END);
    else if (check_invoke_tool(cap, req, &v)) {
        check_context(cap, ctx, req->run_id, &v);
        check_invoke_destination(cap, req, &v);
        if (check_invoke_values(cap, req, &v, &sources, &n_sources) < 0)
            goto oom;
        if (chain != NULL && !str_eq(chain->leaf, req->grant)) {
            flag(&v, GUARD_GRAPH_ERROR, "grant chain facts are of ", chain->leaf, ", not of ",
                 req->grant, END);
        } else {
            if (walk_chain(chain, cap->actor, now, &v, &walked, &n_walked) < 0)
                goto oom;
            check_invoke_coverage(chain, walked, n_walked, req, sources, n_sources, &v);
            if (chain != NULL && chain_ids(chain, walked, n_walked, &order) < 0)
                goto oom;
        }
    }
    int rc = verdict_finish(&v, out, order, n_walked, sources, n_sources);
    free(walked);
    free(order);
    free(sources);
    return rc;
oom:
    free(walked);
    free(order);
    free(sources);
    return fail_oom(&v, out);
}

int guard_check_chain(const guard_chain *chain, const char *actor, double now, guard_decision *out)
{
    verdict v = {0};
    size_t *walked = NULL, n_walked = 0;
    const char **order = NULL;
    if (out == NULL)
        return -1;
    memset(out, 0, sizeof *out);
    if (walk_chain(chain, actor, now, &v, &walked, &n_walked) < 0 ||
        (chain != NULL && chain_ids(chain, walked, n_walked, &order) < 0)) {
        free(walked);
        return fail_oom(&v, out);
    }
    int rc = verdict_finish(&v, out, order, n_walked, NULL, 0);
    free(walked);
    free(order);
    return rc;
}

int guard_check_identity(const guard_identity *id, guard_decision *out)
{
    verdict v = {0};
    if (out == NULL)
        return -1;
    memset(out, 0, sizeof *out);
    if (id == NULL || id->subject == NULL || id->credential == NULL) {
        flag(&v, GUARD_GRAPH_ERROR, "no host identity facts", END);
        return verdict_finish(&v, out, NULL, 0, NULL, 0);
    }
    /* RULE-HOST-IDENTITY: one of the subject's owners is an actor the credential acts for. */
    bool mine = false;
    for (size_t i = 0; !mine && id->owners.items != NULL && i < id->owners.n; i++)
        mine = strs_has(&id->actors, id->owners.items[i]);
    strbuf b;
    if (!mine && flag_begin(&v, GUARD_IDENTITY_MISMATCH, &b)) {
        sb_put(&b, id->subject);
        sb_put(&b, " is owned by ");
        sb_strs(&b, &id->owners);
        sb_put(&b, "; credential ");
        sb_put(&b, id->credential);
        sb_put(&b, " acts for ");
        sb_strs(&b, &id->actors);
        flag_end(&v, GUARD_IDENTITY_MISMATCH, &b);
    }
    return verdict_finish(&v, out, NULL, 0, NULL, 0);
}

void guard_decision_free(guard_decision *d)
{
    if (d == NULL)
        return;
    free(d->witness);
    free(d->chain_order.items);
    free(d->sources.items);
    memset(d, 0, sizeof *d);
}

int guard_decision_unknown(guard_decision *d, const char *witness)
{
    if (d == NULL)
        return -1;
    memset(d, 0, sizeof *d);
    d->outcome = GUARD_UNKNOWN;
    d->codes = 1u << GUARD_GRAPH_ERROR;
    if (witness != NULL) {
        d->witness = str_copy(witness);
        if (d->witness == NULL)
            return -1;
    }
    return 0;
}

void guard_codes_format(unsigned codes, char *buf, size_t size)
{
    if (buf == NULL || size == 0)
        return;
    size_t len = 0;
    buf[0] = '\0';
    for (int c = 0; c < GUARD_CODE_COUNT; c++) {
        if (!(codes & (1u << c)))
            continue;
        const char *name = decision_code_name((guard_code)c);
        size_t n = strlen(name);
        size_t need = n + (len > 0 ? 1 : 0);
        if (len + need + 1 > size)
            break; /* only whole names are written */
        if (len > 0)
            buf[len++] = ',';
        memcpy(buf + len, name, n);
        len += n;
        buf[len] = '\0';
    }
}
