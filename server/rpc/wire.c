/*
 * wire.c - query library replies and guard decisions as charter.v1 messages (see wire.h).
 *
 * The library writes hashes through Lua and cjson, so the same field can arrive as a number,
 * a numeric string, a JSON list or a JSON-encoded list in a string, and an empty list as {}.
 * Every reader here accepts all of those and falls back to the proto default. Redaction fails
 * closed: content is shown to a non-operator only when the label says it is public.
 */
#include "rpc/wire.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static char wire_empty[] = "";

/* --- scalar readers ----------------------------------------------------------------------- */

/* Seconds since the epoch for "YYYY-MM-DDTHH:MM:SS[.fff]Z", or -1. */
static int wire_iso_time(const char *s, double *out)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    int y, mo, d, h, mi;
    double sec;
    char z = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%lf%c", &y, &mo, &d, &h, &mi, &sec, &z) != 7 || z != 'Z') {
        return -1;
    }
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = 0;
    time_t t = timegm(&tm);
    if (t == (time_t)-1) {
        return -1;
    }
    *out = (double)t + sec;
    return 0;
}

/* A number from a JSON number, a numeric string or an ISO-8601 UTC time; ok false otherwise. */
static double wire_number(const json_t *v, bool *ok)
{
    *ok = true;
    if (json_is_number(v)) {
        return json_number_value(v);
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end = NULL;
        double d = strtod(s, &end);
        if (end != s && *end == '\0') {
            return d;
        }
        if (wire_iso_time(s, &d) == 0) {
            return d;
        }
    }
    if (json_is_true(v)) {
        return 1;
    }
    if (json_is_false(v)) {
        return 0;
    }
    *ok = false;
    return 0;
}

static double wire_double(const json_t *j, const char *key)
{
    bool ok;
    double d = wire_number(json_object_get(j, key), &ok);
    return ok ? d : 0;
}

static uint64_t wire_u64(const json_t *j, const char *key)
{
    double d = wire_double(j, key);
    return d > 0 ? (uint64_t)d : 0;
}

static bool wire_bool(const json_t *j, const char *key)
{
    const json_t *v = json_object_get(j, key);
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        return strcmp(s, "1") == 0 || strcasecmp(s, "true") == 0;
    }
    bool ok;
    return wire_number(v, &ok) != 0 && ok;
}

/* Text of any JSON value in the arena: strings as they are, numbers formatted, lists and
 * objects as compact JSON; "" when absent or null, NULL when out of memory. */
static char *wire_text(call *c, const json_t *v)
{
    if (v == NULL || json_is_null(v)) {
        return wire_empty;
    }
    if (json_is_string(v)) {
        return call_strdup(c, json_string_value(v));
    }
    if (json_is_integer(v)) {
        char buf[32];
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        return call_strdup(c, buf);
    }
    if (json_is_real(v)) {
        char buf[64];
        snprintf(buf, sizeof buf, "%.17g", json_real_value(v));
        return call_strdup(c, buf);
    }
    if (json_is_boolean(v)) {
        return call_strdup(c, json_is_true(v) ? "true" : "false");
    }
    char *dump = json_dumps(v, JSON_COMPACT);
    if (dump == NULL) {
        return NULL;
    }
    char *copy = call_strdup(c, dump);
    free(dump);
    return copy;
}

static char *wire_field(call *c, const json_t *j, const char *key, bool *failed)
{
    char *s = wire_text(c, json_object_get(j, key));
    if (s == NULL) {
        *failed = true;
        return wire_empty;
    }
    return s;
}

/* --- lists -------------------------------------------------------------------------------- */

int wire_strings(call *c, const json_t *list, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (list == NULL || json_is_null(list) ||
        (json_is_object(list) && json_object_size(list) == 0)) {
        return 0;
    }
    if (!json_is_array(list)) {
        return -1;
    }
    size_t count = json_array_size(list);
    if (count == 0) {
        return 0;
    }
    char **items = call_alloc(c, count * sizeof *items);
    if (items == NULL) {
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        const json_t *v = json_array_get(list, i);
        /* A list of actor objects ({"id","kind"}) gives their ids. */
        if (json_is_object(v) && json_is_string(json_object_get(v, "id"))) {
            v = json_object_get(v, "id");
        }
        if ((items[i] = wire_text(c, v)) == NULL) {
            return -1;
        }
    }
    *out = items;
    *n = count;
    return 0;
}

/* A list field that may be a JSON list, {} or a string holding a JSON-encoded list. A string
 * that is not JSON counts as a one-element list. */
static int wire_list_field(call *c, const json_t *j, const char *key, char ***out, size_t *n)
{
    const json_t *v = json_object_get(j, key);
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (s[0] == '\0') {
            *out = NULL;
            *n = 0;
            return 0;
        }
        json_t *parsed = json_loads(s, JSON_DECODE_ANY, NULL);
        if (parsed == NULL) {
            char **one = call_alloc(c, sizeof *one);
            if (one == NULL || (one[0] = call_strdup(c, s)) == NULL) {
                return -1;
            }
            *out = one;
            *n = 1;
            return 0;
        }
        int rc = wire_strings(c, parsed, out, n);
        json_decref(parsed);
        return rc;
    }
    if (v != NULL && !json_is_array(v) && !json_is_object(v) && !json_is_null(v)) {
        return -1;
    }
    return wire_strings(c, v, out, n);
}

/* "INPUT_OUT_OF_SCOPE,GRANT_INVALID" or a JSON list into an arena array. */
static int wire_codes(call *c, const json_t *v, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!json_is_string(v)) {
        return (v == NULL || json_is_null(v)) ? 0 : wire_strings(c, v, out, n);
    }
    const char *s = json_string_value(v);
    size_t count = 0;
    for (const char *p = s; *p; p++) {
        count += (*p == ',');
    }
    count++;
    char **items = call_alloc(c, count * sizeof *items);
    if (items == NULL) {
        return -1;
    }
    size_t k = 0;
    const char *p = s;
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && *p == ' ') {
            p++;
            len--;
        }
        if (len > 0) {
            char *item = call_alloc(c, len + 1);
            if (item == NULL) {
                return -1;
            }
            memcpy(item, p, len);
            items[k++] = item;
        }
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
    *out = k > 0 ? items : NULL;
    *n = k;
    return 0;
}

static Charter__V1__Outcome wire_outcome_from(const json_t *v)
{
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    if (strcasecmp(s, "allow") == 0) {
        return CHARTER__V1__OUTCOME__ALLOW;
    }
    if (strcasecmp(s, "deny") == 0) {
        return CHARTER__V1__OUTCOME__DENY;
    }
    if (strcasecmp(s, "unknown") == 0) {
        return CHARTER__V1__OUTCOME__UNKNOWN;
    }
    return CHARTER__V1__OUTCOME__OUTCOME_UNSPECIFIED;
}

/* --- redaction ---------------------------------------------------------------------------- */

/* True when the workflow declares recipient id with clearance public (0 or "public"). */
static bool wire_recipient_public(const call *c, const char *id)
{
    if (c->env == NULL || c->env->wf == NULL || c->env->wf->doc == NULL || id == NULL) {
        return false;
    }
    const json_t *list = json_object_get(c->env->wf->doc, "recipients");
    size_t i;
    const json_t *r;
    json_array_foreach(list, i, r)
    {
        const json_t *rid = json_object_get(r, "id");
        if (!json_is_string(rid) || strcmp(json_string_value(rid), id) != 0) {
            continue;
        }
        const json_t *cl = json_object_get(r, "clearance");
        if (json_is_string(cl)) {
            return strcmp(json_string_value(cl), "public") == 0 ||
                   strcmp(json_string_value(cl), "0") == 0;
        }
        return json_is_integer(cl) && json_integer_value(cl) == 0;
    }
    return false;
}

/* --- messages ----------------------------------------------------------------------------- */

Charter__V1__Artifact *wire_artifact(call *c, const json_t *j)
{
    if (!json_is_object(j)) {
        return NULL;
    }
    Charter__V1__Artifact *a = call_alloc(c, sizeof *a);
    if (a == NULL) {
        return NULL;
    }
    charter__v1__artifact__init(a);
    bool failed = false;
    a->id = wire_field(c, j, "id", &failed);
    a->run_id = wire_field(c, j, "run_id", &failed);
    a->kind = wire_field(c, j, "kind", &failed);
    a->title = wire_field(c, j, "title", &failed);
    bool conf_known = false;
    double conf = wire_number(json_object_get(j, "conf"), &conf_known);
    a->conf = conf_known ? (int32_t)conf : 0;
    a->integrity = (int32_t)wire_double(j, "integrity");
    a->hash = wire_field(c, j, "hash", &failed);
    a->context_id = wire_field(c, j, "context_id", &failed);
    a->step = wire_field(c, j, "step", &failed);
    if (wire_list_field(c, j, "parents", &a->parents, &a->n_parents) != 0 ||
        wire_list_field(c, j, "resources", &a->resources, &a->n_resources) != 0) {
        return NULL;
    }
    /* A label that cannot be read is treated as confidential. A host sees the content of what
     * its own actors' contexts read and wrote (it feeds their models). */
    if (c->role != ROLE_OPERATOR && c->role != ROLE_HOST && (!conf_known || conf > 0)) {
        a->content = wire_empty;
        a->redacted = true;
    } else {
        a->content = wire_field(c, j, "content", &failed);
    }
    return failed ? NULL : a;
}

/* The detail of an invoke decision for a reader who may not see the values of its arguments
 * (a viewer): every argument's value removed and "value_redacted" set; its name, role and
 * lineage stay. NULL when the detail is no such JSON (it is then passed on as recorded). */
static char *wire_invoke_redacted(call *c, const char *detail)
{
    json_t *d = json_loads(detail, 0, NULL);
    json_t *args = json_object_get(d, "arguments");
    size_t i;
    json_t *a;
    json_array_foreach(args, i, a)
    {
        if (json_object_del(a, "value") == 0)
            json_object_set_new(a, "value_redacted", json_true());
    }
    char *text = json_is_array(args) ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    char *out = text != NULL ? call_strdup(c, text) : NULL;
    free(text);
    return out;
}

Charter__V1__Event *wire_event(call *c, const json_t *j)
{
    if (!json_is_object(j)) {
        return NULL;
    }
    Charter__V1__Event *e = call_alloc(c, sizeof *e);
    if (e == NULL) {
        return NULL;
    }
    charter__v1__event__init(e);
    bool failed = false;
    e->run_id = wire_field(c, j, "run_id", &failed);
    e->seq = wire_u64(j, "seq");
    e->kind = wire_field(c, j, "kind", &failed);
    e->outcome = wire_outcome_from(json_object_get(j, "outcome"));
    e->witness = wire_field(c, j, "witness", &failed);
    e->detail = wire_field(c, j, "detail", &failed);
    if (c->role != ROLE_OPERATOR && c->role != ROLE_HOST &&
        strcmp(e->kind, "invoke_decided") == 0) {
        char *redacted = wire_invoke_redacted(c, e->detail);
        /* A detail that cannot be rewritten is not passed on: its values could be in it. */
        e->detail = redacted != NULL ? redacted : wire_empty;
    }
    e->ts = wire_double(j, "ts");
    if (wire_codes(c, json_object_get(j, "codes"), &e->codes, &e->n_codes) != 0) {
        return NULL;
    }
    return failed ? NULL : e;
}

Charter__V1__Delivery *wire_delivery(call *c, const json_t *j)
{
    if (!json_is_object(j)) {
        return NULL;
    }
    Charter__V1__Delivery *d = call_alloc(c, sizeof *d);
    if (d == NULL) {
        return NULL;
    }
    charter__v1__delivery__init(d);
    bool failed = false;
    d->invocation_id = wire_field(c, j, "invocation_id", &failed);
    d->run_id = wire_field(c, j, "run_id", &failed);
    d->fingerprint = wire_field(c, j, "fingerprint", &failed);
    d->recipient = wire_field(c, j, "recipient", &failed);
    d->tool = wire_field(c, j, "tool", &failed);
    d->payload_id = wire_field(c, j, "payload_id", &failed);
    d->payload_hash = wire_field(c, j, "payload_hash", &failed);
    d->committed_at = wire_double(j, "committed_at");
    d->event_seq = wire_u64(j, "event_seq");
    d->archive = wire_field(c, j, "archive", &failed);
    if (wire_list_field(c, j, "grant_chain", &d->grant_chain, &d->n_grant_chain) != 0) {
        return NULL;
    }
    if (c->role != ROLE_OPERATOR && !wire_recipient_public(c, d->recipient)) {
        d->content = wire_empty;
        d->redacted = true;
    } else {
        d->content = wire_field(c, j, "content", &failed);
    }
    return failed ? NULL : d;
}

Charter__V1__Run *wire_run(call *c, const json_t *j)
{
    if (!json_is_object(j)) {
        return NULL;
    }
    Charter__V1__Run *r = call_alloc(c, sizeof *r);
    if (r == NULL) {
        return NULL;
    }
    charter__v1__run__init(r);
    bool failed = false;
    r->id = wire_field(c, j, "id", &failed);
    r->task = wire_field(c, j, "task", &failed);
    r->mode = wire_field(c, j, "mode", &failed);
    r->status = wire_field(c, j, "status", &failed);
    r->seq = wire_u64(j, "seq");
    r->created_at = wire_double(j, "created_at");
    r->workflow = wire_field(c, j, "workflow", &failed);
    r->max_wall_clock_ms = (int64_t)wire_u64(j, "max_wall_clock_ms");
    r->max_model_calls = (int64_t)wire_u64(j, "max_model_calls");
    r->max_steps = (int64_t)wire_u64(j, "max_steps");
    r->max_deliveries = (int64_t)wire_u64(j, "max_deliveries");
    r->wall_clock_ms = (int64_t)wire_u64(j, "wall_clock_ms");
    r->model_calls = (int64_t)wire_u64(j, "model_calls");
    r->steps = (int64_t)wire_u64(j, "steps");
    r->deliveries = (int64_t)wire_u64(j, "deliveries");
    if (json_object_get(j, "cancel_reason") != NULL)
        r->cancel_reason = wire_field(c, j, "cancel_reason", &failed);
    return failed ? NULL : r;
}

Charter__V1__Grant *wire_grant(call *c, const json_t *j)
{
    if (!json_is_object(j)) {
        return NULL;
    }
    Charter__V1__Grant *g = call_alloc(c, sizeof *g);
    if (g == NULL) {
        return NULL;
    }
    charter__v1__grant__init(g);
    bool failed = false;
    g->id = wire_field(c, j, "id", &failed);
    g->root = wire_bool(j, "root");
    g->valid_from = wire_double(j, "valid_from");
    g->valid_to = wire_double(j, "valid_to");
    g->revoked_at = wire_double(j, "revoked_at");
    if (wire_list_field(c, j, "tools", &g->tools, &g->n_tools) != 0 ||
        wire_list_field(c, j, "recipients", &g->recipients, &g->n_recipients) != 0 ||
        wire_list_field(c, j, "resources", &g->resources, &g->n_resources) != 0 ||
        wire_list_field(c, j, "parents", &g->parents, &g->n_parents) != 0 ||
        wire_list_field(c, j, "grantees", &g->grantees, &g->n_grantees) != 0 ||
        wire_list_field(c, j, "issuers", &g->issuers, &g->n_issuers) != 0) {
        return NULL;
    }
    return failed ? NULL : g;
}

Charter__V1__Decision *wire_decision(call *c, const guard_decision *d)
{
    Charter__V1__Decision *m = call_alloc(c, sizeof *m);
    if (m == NULL) {
        return NULL;
    }
    charter__v1__decision__init(m);
    switch (d->outcome) {
    case GUARD_ALLOW:
        m->outcome = CHARTER__V1__OUTCOME__ALLOW;
        break;
    case GUARD_DENY:
        m->outcome = CHARTER__V1__OUTCOME__DENY;
        break;
    default:
        /* Anything that is not a clear allow or deny is reported as unknown (fail closed). */
        m->outcome = CHARTER__V1__OUTCOME__UNKNOWN;
        break;
    }
    size_t count = 0;
    for (int i = 0; i < GUARD_CODE_COUNT; i++) {
        count += (d->codes >> i) & 1u;
    }
    if (count > 0) {
        m->codes = call_alloc(c, count * sizeof *m->codes);
        if (m->codes == NULL) {
            return NULL;
        }
        for (int i = 0; i < GUARD_CODE_COUNT; i++) {
            if ((d->codes >> i) & 1u) {
                m->codes[m->n_codes] = call_strdup(c, decision_code_name((guard_code)i));
                if (m->codes[m->n_codes] == NULL) {
                    return NULL;
                }
                m->n_codes++;
            }
        }
    }
    if (d->witness != NULL) {
        if ((m->witness = call_strdup(c, d->witness)) == NULL) {
            return NULL;
        }
    } else {
        m->witness = wire_empty;
    }
    return m;
}

/* Converts each element of a JSON list with fn into an arena array of message pointers. */
#define WIRE_LIST(c, list, fn, out, n)                                                             \
    do {                                                                                           \
        size_t wl_count = json_is_array(list) ? json_array_size(list) : 0;                         \
        (n) = 0;                                                                                   \
        (out) = NULL;                                                                              \
        if (wl_count > 0) {                                                                        \
            (out) = call_alloc((c), wl_count * sizeof *(out));                                     \
            if ((out) == NULL) {                                                                   \
                return NULL;                                                                       \
            }                                                                                      \
            for (size_t wl_i = 0; wl_i < wl_count; wl_i++) {                                       \
                if (((out)[wl_i] = fn((c), json_array_get((list), wl_i))) == NULL) {               \
                    return NULL;                                                                   \
                }                                                                                  \
            }                                                                                      \
            (n) = wl_count;                                                                        \
        }                                                                                          \
    } while (0)

Charter__V1__RunView *wire_run_view(call *c, const json_t *j)
{
    if (!json_is_object(j)) {
        return NULL;
    }
    Charter__V1__RunView *v = call_alloc(c, sizeof *v);
    if (v == NULL) {
        return NULL;
    }
    charter__v1__run_view__init(v);
    if ((v->run = wire_run(c, json_object_get(j, "run"))) == NULL) {
        return NULL;
    }
    WIRE_LIST(c, json_object_get(j, "events"), wire_event, v->events, v->n_events);
    WIRE_LIST(c, json_object_get(j, "deliveries"), wire_delivery, v->deliveries, v->n_deliveries);
    WIRE_LIST(c, json_object_get(j, "artifacts"), wire_artifact, v->artifacts, v->n_artifacts);
    v->artifacts_next = wire_u64(j, "artifacts_next");
    return v;
}

Charter__V1__Decision *wire_event_decision(call *c, const json_t *event)
{
    Charter__V1__Decision *d = call_alloc(c, sizeof *d);
    if (d == NULL)
        return NULL;
    charter__v1__decision__init(d);
    const char *outcome = json_string_value(json_object_get(event, "outcome"));
    const char *codes = json_string_value(json_object_get(event, "codes"));
    const char *witness = json_string_value(json_object_get(event, "witness"));
    d->outcome = outcome && strcmp(outcome, "allow") == 0  ? CHARTER__V1__OUTCOME__ALLOW
                 : outcome && strcmp(outcome, "deny") == 0 ? CHARTER__V1__OUTCOME__DENY
                                                           : CHARTER__V1__OUTCOME__UNKNOWN;
    if ((d->witness = call_strdup(c, witness ? witness : "")) == NULL)
        return NULL;
    size_t n = 0;
    for (const char *p = codes; p && *p; p++)
        n += *p == ',';
    if (codes && *codes) {
        char *copy = call_strdup(c, codes);
        if (copy == NULL || (d->codes = call_alloc(c, (n + 1) * sizeof *d->codes)) == NULL)
            return NULL;
        for (char *tok = copy, *end; tok != NULL; tok = end) {
            end = strchr(tok, ',');
            if (end)
                *end++ = '\0';
            if (*tok)
                d->codes[d->n_codes++] = tok;
        }
    }
    return d;
}

/* The arguments of a held tool invocation as the approval records them (each {name, value,
 * role, from_task, quoted_from, lineage}); a reader who may not see values (a viewer) gets
 * them empty, as an invoke_decided event's. Returns 0, or -1 when one cannot be encoded. */
static int wire_invoke_arguments(call *c, const json_t *list, Charter__V1__InvokeArgument ***out,
                                 size_t *n)
{
    size_t count = json_is_array(list) ? json_array_size(list) : 0;
    bool values = c->role == ROLE_OPERATOR || c->role == ROLE_HOST;
    *out = NULL;
    *n = 0;
    if (count == 0)
        return 0;
    if ((*out = call_alloc(c, count * sizeof **out)) == NULL)
        return -1;
    for (size_t i = 0; i < count; i++) {
        const json_t *j = json_array_get(list, i);
        Charter__V1__InvokeArgument *a = call_alloc(c, sizeof *a);
        if (a == NULL)
            return -1;
        charter__v1__invoke_argument__init(a);
        bool failed = false;
        a->name = wire_field(c, j, "name", &failed);
        a->value = values ? wire_field(c, j, "value", &failed) : wire_empty;
        a->quoted_from = wire_field(c, j, "quoted_from", &failed);
        a->from_task = json_is_true(json_object_get(j, "from_task"));
        if (failed ||
            wire_strings(c, json_object_get(j, "lineage"), &a->lineage, &a->n_lineage) != 0)
            return -1;
        (*out)[i] = a;
    }
    *n = count;
    return 0;
}

Charter__V1__Approval *wire_approval(call *c, const json_t *j)
{
    if (!json_is_object(j)) {
        return NULL;
    }
    Charter__V1__Approval *a = call_alloc(c, sizeof *a);
    if (a == NULL) {
        return NULL;
    }
    charter__v1__approval__init(a);
    bool failed = false;
    a->id = wire_field(c, j, "id", &failed);
    a->run_id = wire_field(c, j, "run_id", &failed);
    a->invocation_id = wire_field(c, j, "invocation_id", &failed);
    a->state = wire_field(c, j, "state", &failed);
    a->approver = wire_field(c, j, "approver", &failed);
    a->tool = wire_field(c, j, "tool", &failed);
    a->recipient = wire_field(c, j, "recipient", &failed);
    a->payload_id = wire_field(c, j, "payload_id", &failed);
    a->step = wire_field(c, j, "step", &failed);
    a->context_id = wire_field(c, j, "context_id", &failed);
    a->decided_by = wire_field(c, j, "decided_by", &failed);
    a->reason = wire_field(c, j, "reason", &failed);
    a->fingerprint = wire_field(c, j, "fingerprint", &failed);
    a->requested_at = wire_double(j, "requested_at");
    a->deadline = wire_double(j, "deadline");
    a->decided_at = wire_double(j, "decided_at");
    a->event_seq = wire_u64(j, "event_seq");
    if (wire_invoke_arguments(c, json_object_get(j, "arguments"), &a->arguments, &a->n_arguments) !=
        0)
        failed = true;
    return failed ? NULL : a;
}

int wire_approvals(call *c, const json_t *list, Charter__V1__Approval ***out, size_t *n)
{
    size_t count = json_is_array(list) ? json_array_size(list) : 0;
    *n = 0;
    *out = NULL;
    if (count == 0) {
        return 0;
    }
    if ((*out = call_alloc(c, count * sizeof **out)) == NULL) {
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        if (((*out)[i] = wire_approval(c, json_array_get(list, i))) == NULL) {
            return -1;
        }
    }
    *n = count;
    return 0;
}
