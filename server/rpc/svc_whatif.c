/*
 * svc_whatif.c - Evidence/WhatIf: what a candidate workflow would have decided.
 *
 * The recorded decision events in scope (one run, or every run of the candidate's workflow name
 * created since a time, oldest first, at most limit of them) are decided again from their snapshots
 * under the candidate's step capabilities and labels (evaluator_whatif) and those whose outcome or
 * codes would change are reported, with counts by change. The candidate is validated by the
 * workflow loader and never stored; nothing is written and no model is asked, so a viewer may call
 * it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charter.pb-c.h"
#include "evidence/evlog.h"
#include "workflow/registry.h"
#include "policy/evaluator.h"
#include "rpc/services.h"
#include "rpc/wire.h"

#define WHATIF_DEFAULT_LIMIT 1000
#define WHATIF_MAX_LIMIT 100000
#define WHATIF_PAGE 1000 /* events read per charter_get_run */
#define WHATIF_MAX_RUNS "100000"

/* What one call gathers: its changes and counts grow in plain memory and are copied into the
 * call's arena once complete. */
typedef struct {
    call *c;
    const evaluator_candidate *cand;
    uint32_t limit;
    Charter__V1__WhatIfChange **changes;
    size_t n_changes, cap_changes;
    Charter__V1__WhatIfCount **counts;
    size_t n_counts, cap_counts;
    uint64_t examined, no_snapshot;
    bool truncated;
} whatif_scan;

/* A decision in one line: "allow", "deny CLEARANCE_EXCEEDED", "deny A,B". */
static void outcome_text(const char *outcome, const char *codes, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s%s", outcome, *codes ? " " : "", codes);
}

static int grow(void ***items, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t want = *cap ? *cap * 2 : 16;
    void **p = realloc(*items, want * sizeof *p);
    if (p == NULL)
        return -1;
    *items = p;
    *cap = want;
    return 0;
}

/* Counts one change of kind text (in the call's arena). */
static int count_change(whatif_scan *s, const char *text)
{
    for (size_t i = 0; i < s->n_counts; i++)
        if (strcmp(s->counts[i]->change, text) == 0) {
            s->counts[i]->count++;
            return RPC_OK;
        }
    Charter__V1__WhatIfCount *k = call_alloc(s->c, sizeof *k);
    if (k == NULL || grow((void ***)&s->counts, &s->cap_counts, s->n_counts + 1) != 0)
        return call_fail(s->c, RPC_INTERNAL, "out of memory");
    charter__v1__what_if_count__init(k);
    if ((k->change = call_strdup(s->c, text)) == NULL)
        return call_fail(s->c, RPC_INTERNAL, "out of memory");
    k->count = 1;
    s->counts[s->n_counts++] = k;
    return RPC_OK;
}

/* The change of event (recorded) to r (under the candidate), kept in the call's arena. */
static int keep_change(whatif_scan *s, const char *run_id, const json_t *event,
                       const evaluator_whatif_result *r, const Charter__V1__Decision *recorded)
{
    call *c = s->c;
    char was[600], now[600], line[1300], codes[512];
    const char *rec_codes = json_string_value(json_object_get(event, "codes"));
    outcome_text(json_string_value(json_object_get(event, "outcome")), rec_codes ? rec_codes : "",
                 was, sizeof was);
    guard_codes_format(r->decided.codes, codes, sizeof codes);
    outcome_text(decision_outcome_name(r->decided.outcome), codes, now, sizeof now);
    snprintf(line, sizeof line, "%s -> %s", was, now);
    Charter__V1__WhatIfChange *ch = call_alloc(c, sizeof *ch);
    if (ch == NULL || grow((void ***)&s->changes, &s->cap_changes, s->n_changes + 1) != 0)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    charter__v1__what_if_change__init(ch);
    ch->run_id = call_strdup(c, run_id);
    ch->seq = (uint64_t)json_integer_value(json_object_get(event, "seq"));
    ch->gate = call_strdup(c, r->gate);
    ch->step = call_strdup(c, r->step);
    ch->subject = call_strdup(c, r->subject);
    ch->recorded = (Charter__V1__Decision *)recorded;
    ch->candidate = wire_decision(c, &r->decided);
    ch->change = call_strdup(c, line);
    if (!ch->run_id || !ch->gate || !ch->step || !ch->subject || !ch->recorded || !ch->candidate ||
        !ch->change)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    s->changes[s->n_changes++] = ch;
    return count_change(s, line);
}

/* Decides one recorded decision event again under the candidate. */
static int examine(whatif_scan *s, const char *run_id, json_t *event)
{
    call *c = s->c;
    unsigned long long seq = (unsigned long long)json_integer_value(json_object_get(event, "seq"));
    /* A large snapshot is stored once by content: decide from the facts themselves. */
    char *facts = NULL;
    char gone[224];
    int rc = evlog_snapshot_resolve(c->st, json_string_value(json_object_get(event, "snapshot")),
                                    &facts, gone, sizeof gone);
    if (rc == STATUS_OK && json_object_set_new(event, "snapshot", json_string(facts)) != 0)
        rc = STATUS_ENOMEM;
    free(facts);
    if (rc == STATUS_ENOTFOUND || rc == STATUS_EPROTO)
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "run %s event %llu: the facts it names are %s: %s", run_id, seq,
                         rc == STATUS_ENOTFOUND ? "missing" : "altered", gone);
    if (rc != STATUS_OK)
        return call_fail_status(c, rc, "event");
    /* The workflow it was recorded under tells whether its context was narrowed. */
    const workflow *recorded = NULL;
    char version[65];
    if (evaluator_replay_workflow(event, version) == STATUS_OK) {
        rc = registry_get(c->st, version, &recorded);
        if (rc == STATUS_EUNAVAILABLE || rc == STATUS_ENOMEM)
            return call_fail_status(c, rc, "workflow");
        if (rc != STATUS_OK)
            recorded = NULL;
    }
    evaluator_whatif_result r;
    char why[224];
    rc = evaluator_whatif(s->cand, recorded, event, &r, why, sizeof why);
    if (rc == STATUS_ENOMEM)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    if (rc != STATUS_OK)
        return call_fail(c, RPC_FAILED_PRECONDITION, "run %s event %llu: %s", run_id, seq, why);
    int status = RPC_OK;
    if (r.no_snapshot)
        s->no_snapshot++;
    else if (r.changed)
        status = keep_change(s, run_id, event, &r, wire_event_decision(c, event));
    evaluator_whatif_result_free(&r);
    return status;
}

/* Every decision event of run_id, in seq order, until the limit. */
static int scan_run(whatif_scan *s, const char *run_id)
{
    unsigned long long after = 0;
    for (;;) {
        char a[32], page[16];
        snprintf(a, sizeof a, "%llu", after);
        snprintf(page, sizeof page, "%d", WHATIF_PAGE);
        json_t *view = NULL;
        int rc = q_get_run(s->c->st, run_id, a, page, NULL, NULL, NULL, &view);
        if (rc != STATUS_OK)
            return call_fail_status(s->c, rc, "run");
        const json_t *events = json_object_get(view, "events");
        size_t n = json_array_size(events);
        int status = RPC_OK;
        for (size_t i = 0; i < n && status == RPC_OK && !s->truncated; i++) {
            json_t *e = json_array_get(events, i);
            after = (unsigned long long)json_integer_value(json_object_get(e, "seq"));
            const char *outcome = json_string_value(json_object_get(e, "outcome"));
            if (outcome == NULL || *outcome == '\0')
                continue; /* not a decision */
            if (s->examined == s->limit) {
                s->truncated = true;
                break;
            }
            s->examined++;
            status = examine(s, run_id, e);
        }
        json_decref(view);
        if (status != RPC_OK || s->truncated || n < WHATIF_PAGE)
            return status;
    }
}

/* Whether the run r (a charter_list_runs entry) follows a workflow named name: a candidate is
 * compared with the runs of its own workflow only. A run whose workflow cannot be loaded is not
 * one of them. Returns RPC_OK and *same, or the failed call's code. */
static int run_follows(call *c, const json_t *r, const char *name, bool *same)
{
    const char *version = json_string_value(json_object_get(r, "workflow"));
    const workflow *wf = NULL;
    *same = false;
    if (version == NULL || *version == '\0')
        return RPC_OK;
    int rc = registry_get(c->st, version, &wf);
    if (rc == STATUS_EUNAVAILABLE || rc == STATUS_ENOMEM)
        return call_fail_status(c, rc, "workflow");
    *same = rc == STATUS_OK && wf->name != NULL && strcmp(wf->name, name) == 0;
    return RPC_OK;
}

/* The ids of the runs of workflow name created at or after since, oldest first, into *out (a
 * JSON list, caller decrefs). */
static int runs_since(call *c, int64_t since, const char *name, json_t **out)
{
    json_t *j = NULL;
    int rc = q_list_runs(c->st, WHATIF_MAX_RUNS, &j);
    if (rc != STATUS_OK)
        return call_fail_status(c, rc, "runs");
    const json_t *runs = json_object_get(j, "runs");
    json_t *ids = json_array();
    int status = RPC_OK;
    /* charter_list_runs answers newest first. */
    for (size_t i = json_array_size(runs); ids != NULL && status == RPC_OK && i-- > 0;) {
        const json_t *r = json_array_get(runs, i);
        const char *at = json_string_value(json_object_get(r, "created_at"));
        const char *id = json_string_value(json_object_get(r, "id"));
        bool same = false;
        if (id == NULL || (since > 0 && (at == NULL || strtod(at, NULL) < (double)since)))
            continue;
        if ((status = run_follows(c, r, name, &same)) != RPC_OK || !same)
            continue;
        if (json_array_append_new(ids, json_string(id)) != 0) {
            json_decref(ids);
            ids = NULL;
        }
    }
    json_decref(j);
    if (status != RPC_OK) {
        json_decref(ids);
        return status;
    }
    if (ids == NULL)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = ids;
    return RPC_OK;
}

static int respond(whatif_scan *s, const workflow *wf, ProtobufCMessage **out)
{
    call *c = s->c;
    Charter__V1__WhatIfResponse *resp = call_alloc(c, sizeof *resp);
    if (resp == NULL)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    charter__v1__what_if_response__init(resp);
    resp->examined = s->examined;
    resp->truncated = s->truncated;
    resp->no_snapshot = s->no_snapshot;
    resp->workflow_version = call_strdup(c, wf->version);
    resp->changes = call_alloc(c, (s->n_changes ? s->n_changes : 1) * sizeof *resp->changes);
    resp->counts = call_alloc(c, (s->n_counts ? s->n_counts : 1) * sizeof *resp->counts);
    if (!resp->workflow_version || !resp->changes || !resp->counts)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    if (s->n_changes)
        memcpy(resp->changes, s->changes, s->n_changes * sizeof *resp->changes);
    if (s->n_counts)
        memcpy(resp->counts, s->counts, s->n_counts * sizeof *resp->counts);
    resp->n_changes = s->n_changes;
    resp->n_counts = s->n_counts;
    *out = &resp->base;
    return RPC_OK;
}

int svc_whatif_handler(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__WhatIfRequest *req = (const Charter__V1__WhatIfRequest *)in;
    bool one_run = req->run_id != NULL && *req->run_id != '\0';
    if (one_run) {
        int rc = call_require_id(c, "run_id", req->run_id);
        if (rc != RPC_OK)
            return rc;
    }
    if (req->workflow.len == 0)
        return call_fail(c, RPC_INVALID_ARGUMENT,
                         "workflow: empty; send the candidate workflow's JSON (docs/workflows.md)");
    if (req->workflow.len > WORKFLOW_MAX_FILE_BYTES)
        return call_fail(c, RPC_INVALID_ARGUMENT, "workflow: %zu bytes, at most %d (limit)",
                         req->workflow.len, WORKFLOW_MAX_FILE_BYTES);
    if (req->since < 0)
        return call_fail(c, RPC_INVALID_ARGUMENT, "since: seconds since the epoch, 0 or more");
    if (req->limit > WHATIF_MAX_LIMIT)
        return call_fail(c, RPC_INVALID_ARGUMENT, "limit: at most %d decisions", WHATIF_MAX_LIMIT);
    workflow *wf = NULL;
    char err[512];
    if (workflow_load_buffer((const char *)req->workflow.data, req->workflow.len, &wf, err,
                             sizeof err) != 0)
        return call_fail(c, RPC_INVALID_ARGUMENT, "workflow: %s", err);
    evaluator_candidate cand = {0};
    json_t *runs = NULL;
    whatif_scan s = {.c = c, .cand = &cand};
    s.limit = req->limit ? req->limit : WHATIF_DEFAULT_LIMIT;
    int status = RPC_OK;
    if (evaluator_candidate_init(wf, &cand) != STATUS_OK) {
        status = call_fail(c, RPC_INTERNAL, "out of memory");
        goto out;
    }
    if (one_run) {
        runs = json_pack("[s]", req->run_id);
        if (runs == NULL)
            status = call_fail(c, RPC_INTERNAL, "out of memory");
    } else {
        status = runs_since(c, req->since, wf->name, &runs);
    }
    for (size_t i = 0; status == RPC_OK && !s.truncated && i < json_array_size(runs); i++)
        status = scan_run(&s, json_string_value(json_array_get(runs, i)));
    if (status == RPC_OK)
        status = respond(&s, wf, out);
out:
    free(s.changes);
    free(s.counts);
    json_decref(runs);
    evaluator_candidate_free(&cand);
    workflow_free(wf);
    return status;
}
