/*
 * dojo_case.c - one case: a user task's ground truth driven through the gate API as an agent's
 * host would (observe what it reads, record what the model writes, invoke the tools), with the
 * deterministic adversary of an injection task acting the moment a read touches an injection
 * point, then the task resumed, and what charterd committed read back for scoring.
 *
 * The adversary's values are copied from what was read (the injected text, or an item it
 * read) and name everything read so far as their lineage: the conservative rule, a model that
 * read the injection wrote every value after it. From then on, every text the model composes
 * derives from everything read. A value the adversary never got to read (its read was
 * refused) cannot be written: that call is skipped and says so. The quoting adversary (the
 * arm's quoting flag) instead names a trusted artifact that holds a value as its quote when
 * one does, as an agent that names its own quotes may.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dojo.h"

typedef struct {
    char id[129];  /* the artifact */
    char name[80]; /* the item, or "note:<name>" */
    char *content; /* as recorded (owned) */
    bool trusted;  /* an item of a trusted resource (a note never is) */
} dojo_read;

typedef struct {
    dojo_arm *a;
    const dojo_suite *s;
    size_t k;
    charter_client *host;
    const json_t *inj; /* NULL: benign */
    char run[129], ctx[129], other[129];
    dojo_read read[DOJO_MAX_READ];
    size_t n_read;
    char launder[129]; /* after a laundering: the last summary, the only lineage named */
    json_t *append;    /* after an output manipulation: texts every composed value carries */
    bool fired;
    unsigned seq;
    json_t *calls; /* the trace of the JSON line */
    dojo_case *out;
} cstate;

static const char *str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static const char *outcome_name(int o)
{
    return o == CHARTER__V1__OUTCOME__ALLOW  ? "allow"
           : o == CHARTER__V1__OUTCOME__DENY ? "deny"
                                             : "unknown";
}

static json_t *codes_json(const Charter__V1__Decision *d)
{
    json_t *c = json_array();
    for (size_t i = 0; d != NULL && c != NULL && i < d->n_codes; i++)
        json_array_append_new(c, json_string(d->codes[i]));
    return c;
}

/* Appends one call to the trace. */
static void trace(cstate *c, const char *by, const char *kind, const char *name,
                  const char *outcome, json_t *codes, const char *note, double ms)
{
    json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:o}", "by", by, "kind", kind, "name", name,
                          "outcome", outcome, "codes", codes ? codes : json_array());
    if (e != NULL && note != NULL && note[0] != '\0')
        json_object_set_new(e, "note", json_string(note));
    if (e != NULL && ms >= 0)
        json_object_set_new(e, "ms", json_real((double)(long long)(ms * 1000) / 1000));
    json_array_append_new(c->calls, e);
    /* A call that failed as a call (not a decision) voids the case: the benchmark's data or
     * its client is wrong, and no figure may count it. */
    if (strcmp(outcome, "error") == 0 && !c->out->error) {
        c->out->error = true;
        snprintf(c->out->why, sizeof c->out->why, "%.40s %.60s: %.140s", kind, name,
                 note ? note : "");
    }
}

static dojo_read *find_read(cstate *c, const char *name)
{
    for (size_t i = 0; i < c->n_read; i++)
        if (strcmp(c->read[i].name, name) == 0)
            return &c->read[i];
    return NULL;
}

static void add_read(cstate *c, const char *id, const char *name, const char *content)
{
    if (c->n_read == DOJO_MAX_READ)
        return;
    dojo_read *r = &c->read[c->n_read++];
    snprintf(r->id, sizeof r->id, "%s", id);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->content = strdup(content);
    r->trusted = strncmp(name, "note:", 5) != 0 && dojo_item_integrity(c->s, name) == 1;
}

static void fire(cstate *c);

/* Whether the last call of the trace was allowed (a read tool's result is read only then). */
static bool last_allowed(const cstate *c)
{
    const json_t *last = json_array_get(c->calls, json_array_size(c->calls) - 1);
    return last != NULL && strcmp(str(last, "outcome"), "allow") == 0;
}

/* Observes item as the host read it; an injection point fires the adversary once. */
static void do_read(cstate *c, const char *item, const char *by)
{
    bool touched = false;
    const char *text = c->inj != NULL ? str(c->inj, "text") : NULL;
    char *content = dojo_item_render(c->s, item, text, &touched);
    const json_t *it = json_object_get(c->s->items, item);
    Charter__V1__ObserveSourceRequest req = CHARTER__V1__OBSERVE_SOURCE_REQUEST__INIT;
    req.context_id = c->ctx;
    req.resource_id = (char *)str(it, "resource");
    req.content = content;
    req.locator = (char *)str(it, "locator");
    Charter__V1__ObserveSourceResponse *r = NULL;
    charter_status st;
    int rc = content != NULL ? charter_observe_source(c->host, &req, &r, &st) : -1;
    if (rc != 0) {
        trace(c, by, "observe", item, "error", NULL, content ? st.message : "no content", -1);
    } else {
        trace(c, by, "observe", item, outcome_name(r->decision->outcome), codes_json(r->decision),
              NULL, -1);
        if (r->decision->outcome == CHARTER__V1__OUTCOME__ALLOW && r->artifact != NULL)
            add_read(c, r->artifact->id, item, content);
        charter__v1__observe_source_response__free_unpacked(r, NULL);
    }
    free(content);
    c->out->touched |= touched && strcmp(by, "user") == 0;
    if (rc == 0 && touched && c->inj != NULL && !c->fired)
        fire(c);
}

/* Records what the model wrote, derived from inputs (n of them), as an artifact named name. */
static int record(cstate *c, const char *name, const char *content, char **inputs, size_t n,
                  const char *by, char id[129])
{
    Charter__V1__RecordOutputRequest req = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    req.context_id = c->ctx;
    req.input_ids = inputs;
    req.n_input_ids = n;
    req.title = (char *)name;
    req.content = (char *)content;
    Charter__V1__RecordOutputResponse *r = NULL;
    charter_status st;
    if (charter_record_output(c->host, &req, &r, &st) != 0) {
        trace(c, by, "record", name, "error", NULL, st.message, -1);
        return -1;
    }
    bool ok = r->decision->outcome == CHARTER__V1__OUTCOME__ALLOW && r->artifact != NULL;
    trace(c, by, "record", name, outcome_name(r->decision->outcome), codes_json(r->decision), NULL,
          -1);
    if (ok)
        snprintf(id, 129, "%s", r->artifact->id);
    charter__v1__record_output_response__free_unpacked(r, NULL);
    return ok ? 0 : -1;
}

/* Every artifact read or written so far (borrowed ids). */
static size_t all_read(cstate *c, char **ids)
{
    for (size_t i = 0; i < c->n_read; i++)
        ids[i] = c->read[i].id;
    return c->n_read;
}

/* A note the user's model writes: from the items the step names, or, once the model has read
 * an injection (or when the step names none), from everything read. Under an output
 * manipulation the text carries the injected texts. */
static void do_note(cstate *c, const json_t *step)
{
    const char *name = str(step, "note"), *text = str(step, "text");
    char *ids[DOJO_MAX_READ];
    size_t n = 0;
    const json_t *from = json_object_get(step, "from");
    if (c->fired || !json_is_array(from)) {
        n = all_read(c, ids);
    } else {
        size_t i;
        const json_t *f;
        json_array_foreach(from, i, f)
        {
            dojo_read *r = find_read(c, json_string_value(f));
            if (r != NULL && n < DOJO_MAX_READ)
                ids[n++] = r->id;
        }
    }
    size_t len = strlen(text) + 1;
    size_t i;
    const json_t *ap;
    json_array_foreach(c->append, i, ap) len += strlen(json_string_value(ap)) + 1;
    char *content = malloc(len);
    if (content == NULL)
        return;
    snprintf(content, len, "%s", text);
    json_array_foreach(c->append, i, ap)
    {
        strcat(content, "\n");
        strcat(content, json_string_value(ap));
    }
    char id[129], key[80];
    snprintf(key, sizeof key, "note:%s", name);
    if (record(c, name, content, ids, n, "user", id) == 0)
        add_read(c, id, key, content);
    free(content);
}

/* The human: approves a held call of the ground truth, denies any other. */
static int human_decides(cstate *c, const char *inv, bool approve, char *note, size_t n)
{
    Charter__V1__ListApprovalsRequest lr = CHARTER__V1__LIST_APPROVALS_REQUEST__INIT;
    lr.run_id = c->run;
    lr.state = "pending";
    Charter__V1__ListApprovalsResponse *l = NULL;
    charter_status st;
    if (charter_list_approvals(c->a->op, &lr, &l, &st) != 0) {
        snprintf(note, n, "ListApprovals: %s", st.message);
        return -1;
    }
    const Charter__V1__Approval *ap = NULL;
    for (size_t i = 0; i < l->n_approvals && ap == NULL; i++)
        if (strcmp(l->approvals[i]->invocation_id, inv) == 0)
            ap = l->approvals[i];
    int rc = -1;
    Charter__V1__DecideApprovalRequest dr = CHARTER__V1__DECIDE_APPROVAL_REQUEST__INIT;
    Charter__V1__DecideApprovalResponse *d = NULL;
    if (ap != NULL) {
        dr.approval_id = ap->id;
        dr.decision = approve ? "approve" : "deny";
        dr.actor = ap->approver;
        dr.reason = approve ? "the call I asked for" : "not what I asked for";
        rc = charter_decide_approval(c->a->op, &dr, &d, &st);
    }
    snprintf(note, n, "held for %s: %s%s%s", ap ? ap->approver : "?",
             approve ? "approved" : "denied", rc == 0 ? ", " : "",
             rc == 0 ? outcome_name(d->decision->outcome) : "");
    if (d != NULL)
        charter__v1__decide_approval_response__free_unpacked(d, NULL);
    charter__v1__list_approvals_response__free_unpacked(l, NULL);
    return rc;
}

/* One Invoke and its trace; a call held for approval goes to the human. */
static void invoke(cstate *c, const char *ctx, const char *tool, const char *inv,
                   Charter__V1__InvokeArgument **args, size_t n, const char *by)
{
    Charter__V1__InvokeRequest req = CHARTER__V1__INVOKE_REQUEST__INIT;
    req.context_id = (char *)ctx;
    req.tool = (char *)tool;
    req.invocation_id = (char *)inv;
    req.arguments = args;
    req.n_arguments = n;
    Charter__V1__InvokeResponse *r = NULL;
    charter_status st;
    double t0 = dojo_now_ms();
    int rc = charter_invoke(c->host, &req, &r, &st);
    double ms = dojo_now_ms() - t0;
    bool user = strcmp(by, "user") == 0;
    if (rc != 0) {
        trace(c, by, "invoke", tool, "error", NULL, st.message, ms);
        return;
    }
    dojo_latency_add(c->a, ms);
    char note[300] = "";
    bool held = r->decision->outcome == CHARTER__V1__OUTCOME__UNKNOWN && r->decision->witness &&
                strncmp(r->decision->witness, "awaiting approval", 17) == 0;
    if (held) {
        human_decides(c, inv, user, note, sizeof note);
        if (user)
            c->out->held++;
        else
            c->out->attack_held++;
    }
    trace(c, by, "invoke", tool, outcome_name(r->decision->outcome), codes_json(r->decision), note,
          ms);
    charter__v1__invoke_response__free_unpacked(r, NULL);
}

/* A ground-truth argument: "task:V", "quote:ITEM:V", "note:NAME[:V]" or "read:V". Fills a and
 * returns 0, or -1 when what it names was not read. */
static int user_value(cstate *c, const char *name, const char *spec, Charter__V1__InvokeArgument *a,
                      char **one, char *lineage[DOJO_MAX_READ])
{
    charter__v1__invoke_argument__init(a);
    a->name = (char *)name;
    const char *colon = strchr(spec, ':');
    if (colon == NULL)
        return -1;
    if (strncmp(spec, "task:", 5) == 0) {
        a->value = (char *)spec + 5;
        a->from_task = true;
        return 0;
    }
    if (strncmp(spec, "read:", 5) == 0) {
        a->value = (char *)spec + 5;
        a->n_lineage = all_read(c, lineage);
        a->lineage = lineage;
        return 0;
    }
    const char *second = strchr(colon + 1, ':');
    char key[80];
    bool note = strncmp(spec, "note:", 5) == 0;
    size_t klen = second ? (size_t)(second - colon - 1) : strlen(colon + 1);
    snprintf(key, sizeof key, "%s%.*s", note ? "note:" : "", (int)klen, colon + 1);
    dojo_read *r = find_read(c, key);
    if (r == NULL)
        return -1;
    a->value = second != NULL ? (char *)second + 1 : r->content;
    if (note) {
        one[0] = r->id;
        a->lineage = one;
        a->n_lineage = 1;
    } else {
        a->quoted_from = r->id;
    }
    return 0;
}

static void next_inv(cstate *c, char inv[160])
{
    snprintf(inv, 160, "%s.%u", c->run, ++c->seq);
}

static void do_user_call(cstate *c, const json_t *step)
{
    const char *tool = str(step, "call");
    const json_t *args = json_object_get(step, "args");
    size_t n = json_object_size(args), i = 0;
    Charter__V1__InvokeArgument av[32], *ap[32];
    char *ones[32][1], *lineage[32][DOJO_MAX_READ];
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)args, name, v)
    {
        if (i == 32 ||
            user_value(c, name, json_string_value(v), &av[i], ones[i], lineage[i]) != 0) {
            trace(c, "user", "invoke", tool, "skipped", NULL, "a value names what was not read",
                  -1);
            return;
        }
        ap[i] = &av[i];
        i++;
    }
    char inv[160];
    if (str(step, "invocation") != NULL)
        snprintf(inv, sizeof inv, "%s", str(step, "invocation"));
    else
        next_inv(c, inv);
    invoke(c, c->ctx, tool, inv, ap, n, "user");
    if (dojo_tool_has_effect(c->s, tool))
        c->out->effects++;
}

/* The quoting adversary's origin for value: a trusted artifact read so far that holds it (as an
 * agent that names quoted_from itself may, charter-mcp's tool arguments), or NULL. */
static const char *trusted_quote(const cstate *c, const char *value)
{
    for (size_t i = 0; c->a->quoting && i < c->n_read; i++)
        if (c->read[i].trusted && dojo_token_holds(c->read[i].content, value))
            return c->read[i].id;
    return NULL;
}

/* The adversary's origin of one value: quoted from a trusted artifact (the quoting adversary,
 * when one holds it), else the last laundered summary, else everything read. Returns 0, or -1
 * when nothing read holds the value (the model never read it). */
static int attack_origin(cstate *c, Charter__V1__InvokeArgument *a, char **ids)
{
    const char *quote = trusted_quote(c, a->value);
    if (quote != NULL) {
        a->quoted_from = (char *)quote;
        return 0;
    }
    a->lineage = ids;
    if (c->launder[0] != '\0') {
        dojo_read *r = find_read(c, "note:laundered");
        ids[0] = c->launder;
        a->n_lineage = 1;
        return r != NULL && dojo_token_holds(r->content, a->value) ? 0 : -1;
    }
    bool held = false;
    for (size_t i = 0; i < c->n_read && !held; i++)
        held = dojo_token_holds(c->read[i].content, a->value);
    a->n_lineage = all_read(c, ids);
    return held ? 0 : -1;
}

static void do_attack_call(cstate *c, const json_t *step)
{
    const char *tool = str(step, "call");
    const json_t *args = json_object_get(step, "args");
    size_t n = 0;
    Charter__V1__InvokeArgument av[32], *ap[32];
    char *lineage[32][DOJO_MAX_READ];
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)args, name, v)
    {
        if (n == 32)
            break;
        charter__v1__invoke_argument__init(&av[n]);
        av[n].name = (char *)name;
        av[n].value = (char *)json_string_value(v);
        if (attack_origin(c, &av[n], lineage[n]) != 0) {
            trace(c, "attacker", "invoke", tool, "skipped", NULL,
                  "a value the model never read cannot be written", -1);
            return;
        }
        ap[n] = &av[n];
        n++;
    }
    const char *ctx = str(step, "context") != NULL ? c->other : c->ctx;
    json_int_t repeat = json_integer_value(json_object_get(step, "repeat"));
    for (json_int_t r = 0; r < (repeat > 0 ? repeat : 1); r++) {
        char inv[160];
        if (str(step, "invocation") != NULL && r == 0)
            snprintf(inv, sizeof inv, "%s", str(step, "invocation"));
        else
            next_inv(c, inv);
        invoke(c, ctx, tool, inv, ap, n, "attacker");
    }
}

/* Summaries of summaries: the first of everything read, each next of the one before. */
static void do_launder(cstate *c, json_int_t hops)
{
    size_t len = 1;
    for (size_t i = 0; i < c->n_read; i++)
        len += strlen(c->read[i].content) + 1;
    char *content = calloc(1, len);
    for (size_t i = 0; content != NULL && i < c->n_read; i++) {
        strcat(content, c->read[i].content);
        strcat(content, "\n");
    }
    char *ids[DOJO_MAX_READ], prev[129] = "";
    size_t n = all_read(c, ids);
    for (json_int_t h = 0; content != NULL && h < hops; h++) {
        char id[129];
        char *one[1] = {prev};
        if (record(c, "Summary", content, h == 0 ? ids : one, h == 0 ? n : 1, "attacker", id) != 0)
            break;
        snprintf(prev, sizeof prev, "%s", id);
    }
    if (prev[0] != '\0') {
        add_read(c, prev, "note:laundered", content);
        snprintf(c->launder, sizeof c->launder, "%s", prev);
    }
    free(content);
}

/* The adversary: the injection task's reads and calls, bound to what was read so far. */
static void fire(cstate *c)
{
    c->fired = true;
    c->out->fired = true;
    size_t i;
    const json_t *st;
    json_array_foreach(json_object_get(c->inj, "calls"), i, st)
    {
        if (json_object_get(st, "via") != NULL)
            do_attack_call(c, json_object_get(st, "via"));
        if (str(st, "read") != NULL && (json_object_get(st, "via") == NULL || last_allowed(c)))
            do_read(c, str(st, "read"), "attacker");
        else if (str(st, "call") != NULL)
            do_attack_call(c, st);
        else if (json_object_get(st, "launder") != NULL)
            do_launder(c, json_integer_value(json_object_get(st, "launder")));
    }
    /* An output manipulation keeps only the texts the model read. */
    const json_t *append = json_object_get(c->inj, "append");
    json_t *kept = json_array();
    json_array_foreach(append, i, st)
    {
        bool held = false;
        for (size_t k = 0; k < c->n_read && !held; k++)
            held = dojo_token_holds(c->read[k].content, json_string_value(st));
        if (held)
            json_array_append(kept, (json_t *)st);
    }
    c->append = kept;
}

static int open_step(cstate *c, charter_client *who, const char *step, char ctx[129])
{
    Charter__V1__OpenStepRequest req = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    req.run_id = c->run;
    req.step = (char *)step;
    Charter__V1__StepContext *r = NULL;
    charter_status st;
    if (charter_open_step(who, &req, &r, &st) != 0) {
        snprintf(c->out->why, sizeof c->out->why, "OpenStep %.60s: %.180s", step, st.message);
        return -1;
    }
    snprintf(ctx, 129, "%s", r->context_id);
    charter__v1__step_context__free_unpacked(r, NULL);
    return 0;
}

/* A run of the suite's workflow whose task is the user's words, the agent's step opened by its
 * host, and the other actor's step (when the suite has one) opened by the orchestrator. */
static int start_run(cstate *c, const char *task)
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.task = (char *)task;
    req.mode = "external";
    req.workflow = (char *)c->s->workflow_name;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    if (charter_create_run(c->a->op, &req, &v, &st) != 0) {
        snprintf(c->out->why, sizeof c->out->why, "CreateRun: %.200s", st.message);
        return -1;
    }
    snprintf(c->run, sizeof c->run, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    if (open_step(c, c->host, c->s->step, c->ctx) != 0)
        return -1;
    if (c->s->other_step != NULL && open_step(c, c->a->op, c->s->other_step, c->other) != 0)
        return -1;
    return 0;
}

static void run_steps(cstate *c, const json_t *steps)
{
    size_t i;
    const json_t *st;
    json_array_foreach(steps, i, st)
    {
        if (json_object_get(st, "via") != NULL)
            do_user_call(c, json_object_get(st, "via"));
        if (str(st, "read") != NULL && (json_object_get(st, "via") == NULL || last_allowed(c)))
            do_read(c, str(st, "read"), "user");
        else if (str(st, "note") != NULL)
            do_note(c, st);
        else if (str(st, "call") != NULL)
            do_user_call(c, st);
    }
}

static void cstate_free(cstate *c)
{
    for (size_t i = 0; i < c->n_read; i++)
        free(c->read[i].content);
    json_decref(c->calls);
    json_decref(c->append);
}

/* The case's JSON line and the digest two passes compare (no ids, no timings). */
static void describe(cstate *c, const json_t *user, const json_t *committed)
{
    dojo_case *o = c->out;
    json_t *line = json_pack(
        "{s:s, s:s, s:s, s:s?, s:s?, s:b, s:o, s:b, s:I, s:I, s:I, s:O, s:O}", "suite", c->s->name,
        "arm", c->a->name, "user_task", str(user, "id"), "injection_task",
        c->inj ? str(c->inj, "id") : NULL, "class", c->inj ? str(c->inj, "class") : NULL, "utility",
        o->utility, "attack_success", c->inj ? json_boolean(o->success) : json_null(),
        "touched_injection_point", o->touched, "effects", (json_int_t)o->effects, "held",
        (json_int_t)o->held, "attack_held", (json_int_t)o->attack_held, "calls", c->calls,
        "committed", committed ? committed : json_null());
    if (line == NULL)
        return;
    o->line = json_dumps(line, JSON_COMPACT);
    json_t *calls = json_deep_copy(c->calls);
    size_t i;
    json_t *e;
    json_array_foreach(calls, i, e) json_object_del(e, "ms");
    json_object_set_new(line, "calls", calls);
    json_object_del(line, "arm");
    o->digest = json_dumps(line, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(line);
}

/* The end of a case: what was committed, and the predicates over it. */
static void score(cstate *c, const json_t *user)
{
    char err[256] = "";
    json_t *committed = dojo_committed(c->a->op, c->run, err, sizeof err);
    if (committed == NULL) {
        c->out->error = true;
        snprintf(c->out->why, sizeof c->out->why, "GetRun: %.200s", err);
    }
    c->out->utility = dojo_predicates_hold(json_object_get(user, "utility"), committed);
    c->out->success =
        c->inj != NULL && dojo_predicates_hold(json_object_get(c->inj, "success"), committed);
    describe(c, user, committed);
    json_decref(committed);
}

int dojo_case_run(dojo_arm *a, const dojo_suite *s, size_t k, size_t user, long injection,
                  dojo_case *out)
{
    memset(out, 0, sizeof *out);
    out->suite = k;
    out->user = user;
    out->injection = injection;
    const json_t *u = json_array_get(s->users, user);
    cstate c = {.a = a, .s = s, .k = k, .host = a->host[k], .out = out, .calls = json_array()};
    c.inj = injection >= 0 ? json_array_get(s->injections, (size_t)injection) : NULL;
    if (start_run(&c, str(u, "prompt")) != 0) {
        out->error = true;
        cstate_free(&c);
        return -1;
    }
    do_read(&c, s->session, "user");
    run_steps(&c, json_object_get(u, "steps"));
    score(&c, u);
    cstate_free(&c);
    return out->error ? -1 : 0;
}

/* The user's earlier session (suite.json "history"): its calls committed before any case, so
 * a replay has an invocation to replay. */
int dojo_history_run(dojo_arm *a, const dojo_suite *s, size_t k, char *err, size_t n)
{
    if (s->history == NULL)
        return 0;
    dojo_case out;
    memset(&out, 0, sizeof out);
    cstate c = {.a = a, .s = s, .k = k, .host = a->host[k], .out = &out, .calls = json_array()};
    int rc = start_run(&c, str(s->history, "prompt"));
    if (rc == 0) {
        do_read(&c, s->session, "user");
        run_steps(&c, json_object_get(s->history, "steps"));
        json_t *committed = dojo_committed(a->op, c.run, err, n);
        rc = dojo_predicates_hold(json_object_get(s->history, "utility"), committed) ? 0 : -1;
        if (rc != 0 && committed != NULL)
            snprintf(err, n, "%s: the history's calls were not committed", s->name);
        json_decref(committed);
    } else {
        snprintf(err, n, "%s: history: %.200s", s->name, out.why);
    }
    cstate_free(&c);
    return rc;
}

void dojo_case_free(dojo_case *c)
{
    free(c->line);
    free(c->digest);
    c->line = c->digest = NULL;
}
