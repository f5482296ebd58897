/*
 * svc_whatif.c - Evidence/WhatIf: what a candidate workflow would have decided.
 *
 * The recorded decision events in scope (one run, or every run of the candidate's workflow name
 * created since a time, oldest first, at most limit of them) are decided again from their snapshots
 * under the candidate's step capabilities and labels (evaluator_whatif) and those whose outcome or
 * codes would change are reported, with counts by change. The candidate is validated by the
 * workflow loader and never stored; nothing is written and no model is asked, so a viewer may call
 * it. One run that left the database (retention) is decided from its archive file in charterd's
 * archive folder, as `charter what-if --archive` decides it offline, with the workflow it was
 * recorded under read from the registry as for a run in the database: the report is the one the
 * run had before it left.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charter.pb-c.h"
#include "evidence/archive_lookup.h"
#include "evidence/archive_replay.h"
#include "evidence/evlog.h"
#include "workflow/registry.h"
#include "policy/evaluator.h"
#include "rpc/services.h"
#include "rpc/wire.h"

#define WHATIF_DEFAULT_LIMIT 1000
#define WHATIF_MAX_LIMIT 100000
#define WHATIF_PAGE 1000 /* events read per charter_get_run */
#define WHATIF_MAX_RUNS "100000"
/* Not RPC statuses (those are 0..16): a run the database does not have (scan_run), and the
 * limit reached in the middle of an archive (archive_visit). */
#define WHATIF_GONE 100
#define WHATIF_FULL 101

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

/* Decides one recorded decision event again under the candidate, its snapshot resolved. */
static int decide(whatif_scan *s, const char *run_id, json_t *event)
{
    call *c = s->c;
    unsigned long long seq = (unsigned long long)json_integer_value(json_object_get(event, "seq"));
    /* The workflow it was recorded under tells whether its context was narrowed. */
    const workflow *recorded = NULL;
    char version[65];
    if (evaluator_replay_workflow(event, version) == STATUS_OK) {
        int rc = registry_get(c->st, version, &recorded);
        if (rc == STATUS_EUNAVAILABLE || rc == STATUS_ENOMEM)
            return call_fail_status(c, rc, "workflow");
        if (rc != STATUS_OK)
            recorded = NULL;
    }
    evaluator_whatif_result r;
    char why[224];
    int rc = evaluator_whatif(s->cand, recorded, event, &r, why, sizeof why);
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

/* Decides one recorded decision event of the database again under the candidate. */
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
    return decide(s, run_id, event);
}

/* Counts one more decision examined; false (and truncated set) once the limit is reached. */
static bool take_one(whatif_scan *s)
{
    if (s->examined == s->limit) {
        s->truncated = true;
        return false;
    }
    s->examined++;
    return true;
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
        if (rc == STATUS_ENOTFOUND && after == 0)
            return WHATIF_GONE;
        if (rc != STATUS_OK)
            return call_fail_run(s->c, rc, run_id);
        const json_t *events = json_object_get(view, "events");
        size_t n = json_array_size(events);
        int status = RPC_OK;
        for (size_t i = 0; i < n && status == RPC_OK && !s->truncated; i++) {
            json_t *e = json_array_get(events, i);
            after = (unsigned long long)json_integer_value(json_object_get(e, "seq"));
            const char *outcome = json_string_value(json_object_get(e, "outcome"));
            if (outcome == NULL || *outcome == '\0')
                continue; /* not a decision */
            if (!take_one(s))
                break;
            status = examine(s, run_id, e);
        }
        json_decref(view);
        if (status != RPC_OK || s->truncated || n < WHATIF_PAGE)
            return status;
    }
}

/* What one archive's walk needs: the scan, and the run the file must be of. */
typedef struct {
    whatif_scan *s;
    const char *run_id;
} archive_walk;

/* One decision event of the archive (archive_decisions): its seq made a number, as the
 * database gives it, and decided again. Returns RPC_OK, a failure recorded, or WHATIF_FULL. */
static int archive_visit(void *ctx, const char *run_id, json_t *event)
{
    archive_walk *w = ctx;
    whatif_scan *s = w->s;
    if (strcmp(run_id, w->run_id) != 0)
        return call_fail(s->c, RPC_FAILED_PRECONDITION,
                         "the archive of run %.128s holds run %.128s", w->run_id, run_id);
    const char *seq = json_string_value(json_object_get(event, "seq"));
    if (seq != NULL && json_object_set_new(event, "seq", json_integer(strtoll(seq, NULL, 10))) != 0)
        return call_fail(s->c, RPC_INTERNAL, "out of memory");
    if (!take_one(s))
        return WHATIF_FULL;
    return decide(s, run_id, event);
}

/* Every decision event of run_id, which left the database, from its archive file in charterd's
 * archive folder (found through the graph folder's index, never at a name the database
 * holds), in seq order, until the limit; archive (n bytes) names the file. */
static int scan_archived(whatif_scan *s, const char *run_id, char *archive, size_t n)
{
    call *c = s->c;
    char path[1536], why[300];
    int rc = c->env->archive_dir == NULL
                 ? STATUS_ENOTFOUND
                 : archive_find_run(c->env->archive_dir, store_graph(c->st), run_id, path,
                                    sizeof path, archive, n, why, sizeof why);
    if (rc == STATUS_ENOTFOUND)
        return call_fail_run(c, rc, run_id);
    if (rc == STATUS_EPROTO || rc == STATUS_EDENIED)
        return call_fail(c, RPC_FAILED_PRECONDITION, "run %.128s left the database: %s", run_id,
                         why);
    if (rc != STATUS_OK)
        return call_fail_status_id(c, rc, "the archive of run", run_id);
    archive_walk w = {.s = s, .run_id = run_id};
    rc = archive_decisions(path, archive_visit, &w, why, sizeof why);
    if (rc == WHATIF_FULL || rc == RPC_OK)
        return RPC_OK;
    if (rc > 0)
        return rc; /* recorded by the visit */
    if (rc == STATUS_ENOMEM)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    return call_fail(c, RPC_FAILED_PRECONDITION, "run %.128s, archived to %s: %s", run_id, archive,
                     why[0] ? why : "its archive cannot be read");
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

static int respond(whatif_scan *s, const workflow *wf, const char *archive, ProtobufCMessage **out)
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
    resp->archive = call_strdup(c, archive);
    resp->changes = call_alloc(c, (s->n_changes ? s->n_changes : 1) * sizeof *resp->changes);
    resp->counts = call_alloc(c, (s->n_counts ? s->n_counts : 1) * sizeof *resp->counts);
    if (!resp->workflow_version || !resp->archive || !resp->changes || !resp->counts)
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

/* The request's fields checked before anything is read. */
static int check_request(call *c, const Charter__V1__WhatIfRequest *req)
{
    if (req->run_id != NULL && *req->run_id != '\0') {
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
    return RPC_OK;
}

/* Every decision in scope: the one run asked for (from its archive when it left the database:
 * archive, n bytes, then names the file), or each run of the candidate's workflow since a
 * time, in the database. */
static int scan_scope(whatif_scan *s, const Charter__V1__WhatIfRequest *req, const workflow *wf,
                      char *archive, size_t n)
{
    call *c = s->c;
    bool one_run = req->run_id != NULL && *req->run_id != '\0';
    json_t *runs = NULL;
    int status = RPC_OK;
    if (one_run) {
        if ((runs = json_pack("[s]", req->run_id)) == NULL)
            status = call_fail(c, RPC_INTERNAL, "out of memory");
    } else {
        status = runs_since(c, req->since, wf->name, &runs);
    }
    for (size_t i = 0; status == RPC_OK && !s->truncated && i < json_array_size(runs); i++) {
        const char *run_id = json_string_value(json_array_get(runs, i));
        status = scan_run(s, run_id);
        /* A run of the list that left the database since it was listed is not found. */
        if (status == WHATIF_GONE)
            status = one_run ? scan_archived(s, run_id, archive, n)
                             : call_fail_run(c, STATUS_ENOTFOUND, run_id);
    }
    json_decref(runs);
    return status;
}

int svc_whatif_handler(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__WhatIfRequest *req = (const Charter__V1__WhatIfRequest *)in;
    int status = check_request(c, req);
    if (status != RPC_OK)
        return status;
    workflow *wf = NULL;
    char err[512];
    if (workflow_load_buffer((const char *)req->workflow.data, req->workflow.len, &wf, err,
                             sizeof err) != 0)
        return call_fail(c, RPC_INVALID_ARGUMENT, "workflow: %s", err);
    evaluator_candidate cand = {0};
    whatif_scan s = {.c = c, .cand = &cand};
    s.limit = req->limit ? req->limit : WHATIF_DEFAULT_LIMIT;
    char archive[768] = "";
    if (evaluator_candidate_init(wf, &cand) != STATUS_OK)
        status = call_fail(c, RPC_INTERNAL, "out of memory");
    if (status == RPC_OK)
        status = scan_scope(&s, req, wf, archive, sizeof archive);
    if (status == RPC_OK)
        status = respond(&s, wf, archive, out);
    free(s.changes);
    free(s.counts);
    evaluator_candidate_free(&cand);
    workflow_free(wf);
    return status;
}
