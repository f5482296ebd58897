/*
 * runner.c - the built-in workflow executor.
 *
 * It is an agent host like any other: each step opens a context, reads its sources, passes
 * every input through the input gate, asks the model, records the output and delivers through
 * gate.c and deliver.c. A handoff the gate refuses stops the run as "blocked" before the next
 * step's model is called. Status changes are atomic transitions in the database, so two
 * recoveries of one run (in one process or in two) cannot both proceed. Under an executor's
 * lease, a send held for a human approval is waited for here, never on an RPC worker. Every
 * event goes into the run's hash chain through evlog.c; a run that ends gets its run receipt.
 */
#include "runs/runner.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "evidence/checkpoint.h"
#include "gates/deliver.h"
#include "gates/invoke.h"
#include "evidence/evlog.h"
#include "runs/ask.h"
#include "runs/model.h"
#include "runs/provider.h"
#include "evidence/receipt_issue.h"
#include "workflow/registry.h"
#include "core/digest.h"
#include "core/invariant.h"

/* Artifact ids handed from one step to the next, by step index. */
typedef struct {
    char **ids;
    size_t n;
} id_list;

static void id_list_free(id_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->ids[i]);
    free(l->ids);
    l->ids = NULL;
    l->n = 0;
}

static int id_list_add(id_list *l, const char *id)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->ids[i], id) == 0)
            return 0;
    char **grown = realloc(l->ids, (l->n + 1) * sizeof *grown);
    if (!grown)
        return -1;
    l->ids = grown;
    if (!(l->ids[l->n] = strdup(id)))
        return -1;
    l->n++;
    return 0;
}

/* Moves the run from one of the comma-separated statuses in from to to. Returns STATUS_OK when
 * it moved, STATUS_EREFUSED when the run was in another status (written to current, 32 bytes). */
static int transition(const gate_env *g, const char *run_id, const char *from, const char *to,
                      const char *detail, char current[32])
{
    if (current)
        current[0] = '\0';
    return evlog_transition(g->st, run_id, from, to, detail ? detail : "", NULL, current);
}

/* Appends an event that records no decision; takes the reference to detail. */
static void note_event(const gate_env *g, const char *run_id, const char *kind, json_t *detail)
{
    evlog_owned ev;
    if (evlog_owned_event(&ev, kind, NULL, NULL, detail, NULL) == STATUS_OK)
        /* A lost note does not change any decision: decisions are recorded by the gates. */
        (void)evlog_append(g->st, run_id, &ev.ev, NULL);
    evlog_owned_free(&ev);
    json_decref(detail);
}

static json_t *id_list_json(const id_list *l)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < l->n; i++)
        json_array_append_new(a, json_string(l->ids[i]));
    return a;
}

/* Where one step left the run. */
typedef enum { STEP_DONE, STEP_BLOCKED, STEP_FAILED } step_end;

/* A run an executor holds under a lease: its counters, its budgets (as the last renewal read
 * them) and, once it must stop, why. Checked before each step, model request and delivery,
 * and during a model request through its abort hook. */
typedef struct {
    const gate_env *g;
    const char *run_id;
    const runner_lease *lease;
    struct timespec t0; /* when the executor began the run (wall clock budget) */
    long long steps, model_calls, deliveries;
    long long max_wall_clock_ms, max_model_calls, max_steps, max_deliveries;
    const char *step; /* the step in progress */
    const char *from; /* the status the run executes in: "running", or "recovering" */
    bool recovery;    /* a recovery: outside the run's budgets, its counters left as they are */
    char stop[32];    /* "", "cancelled", "budget_exhausted", "interrupted" or "lost" */
    char reason[128]; /* the cancel reason, or the budget's name */
    struct timespec last_renew;
} exec_state;

typedef enum { CHECK_STEP, CHECK_MODEL, CHECK_DELIVERY, CHECK_TICK } check_point;

static long long ms_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)(t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* x set up for one execution of run_id under lease, from status from ("running" or
 * "recovering"), its wall clock starting now. */
static void exec_init(exec_state *x, const gate_env *g, const char *run_id,
                      const runner_lease *lease, const char *from)
{
    memset(x, 0, sizeof *x);
    x->g = g;
    x->run_id = run_id;
    x->lease = lease;
    x->from = from;
    clock_gettime(CLOCK_MONOTONIC, &x->t0);
    x->last_renew = x->t0;
}

static void exec_stop(exec_state *x, const char *stop, const char *reason)
{
    if (x->stop[0])
        return; /* the first reason to stop is the one recorded */
    snprintf(x->stop, sizeof x->stop, "%s", stop);
    snprintf(x->reason, sizeof x->reason, "%s", reason);
}

/* Renews the lease, storing the counters; reads the cancel request and the budgets. A renewal
 * that fails to reach the database leaves the lease to lapse on its own: the run stops. */
static void exec_renew(exec_state *x)
{
    char lease_ms[32];
    snprintf(lease_ms, sizeof lease_ms, "%d", x->lease->lease_ms);
    json_t *counters =
        x->recovery
            ? json_object()
            : json_pack("{s:I, s:I, s:I, s:I}", "wall_clock_ms", (json_int_t)ms_since(&x->t0),
                        "model_calls", (json_int_t)x->model_calls, "steps", (json_int_t)x->steps,
                        "deliveries", (json_int_t)x->deliveries);
    char *text = counters ? json_dumps(counters, JSON_COMPACT) : NULL;
    json_decref(counters);
    json_t *reply = NULL;
    int rc = STATUS_ENOMEM;
    if (text)
        rc = q_renew_lease(x->g->st, x->run_id, x->lease->owner, lease_ms, text, &reply);
    free(text);
    clock_gettime(CLOCK_MONOTONIC, &x->last_renew);
    if (rc != STATUS_OK || !json_is_true(json_object_get(reply, "held"))) {
        exec_stop(x, "lost", rc != STATUS_OK ? "the lease could not be renewed" : "lease lost");
        json_decref(reply);
        return;
    }
    const char *cancel = json_string_value(json_object_get(reply, "cancel"));
    json_t *b = x->recovery ? NULL : json_object_get(reply, "budget");
    x->max_wall_clock_ms = json_integer_value(json_object_get(b, "max_wall_clock_ms"));
    x->max_model_calls = json_integer_value(json_object_get(b, "max_model_calls"));
    x->max_steps = json_integer_value(json_object_get(b, "max_steps"));
    x->max_deliveries = json_integer_value(json_object_get(b, "max_deliveries"));
    if (cancel && *cancel)
        exec_stop(x, "cancelled", cancel);
    json_decref(reply);
}

/* Returns true when the run may go on past point; else x->stop says why. */
static bool exec_check(exec_state *x, check_point point)
{
    if (!x)
        return true;
    /* During a model request the lease is renewed every third of its length; in between only
     * the wall clock moves. */
    if (point != CHECK_TICK || ms_since(&x->last_renew) >= x->lease->lease_ms / 3)
        exec_renew(x);
    if (x->lease->stopping && atomic_load(x->lease->stopping))
        exec_stop(x, "interrupted", "charterd stopping");
    if (x->recovery)
        return x->stop[0] == '\0';
    if (x->max_wall_clock_ms > 0 && ms_since(&x->t0) >= x->max_wall_clock_ms)
        exec_stop(x, "budget_exhausted", "max_wall_clock_ms");
    if (point == CHECK_STEP && x->max_steps > 0 && x->steps >= x->max_steps)
        exec_stop(x, "budget_exhausted", "max_steps");
    if (point == CHECK_MODEL && x->max_model_calls > 0 && x->model_calls >= x->max_model_calls)
        exec_stop(x, "budget_exhausted", "max_model_calls");
    if (point == CHECK_DELIVERY && x->max_deliveries > 0 && x->deliveries >= x->max_deliveries)
        exec_stop(x, "budget_exhausted", "max_deliveries");
    return x->stop[0] == '\0';
}

/* model_request's abort hook: the transfer stops when the run must. */
static int exec_abort(void *arg, char reason[128])
{
    exec_state *x = arg;
    if (exec_check(x, CHECK_TICK))
        return 0;
    snprintf(reason, 128, "%.31s (%.90s)", x->stop, x->reason);
    return 1;
}

static step_end end_of(const guard_decision *d)
{
    return d->outcome == GUARD_ALLOW  ? STEP_DONE
           : d->outcome == GUARD_DENY ? STEP_BLOCKED
                                      : STEP_FAILED;
}

/* Fetches the contents of artifacts ids for the model request, in order, each checked against
 * the SHA-256 it was recorded with as recorded ({id: hex}, step_state) says: the content field
 * is in no summary and no seal, so it is hashed here, after the gate and before anything is
 * sent. Returns STATUS_OK; STATUS_EREFUSED with why (whylen bytes) naming the first artifact
 * whose content no longer has that hash (or whose hash is not known): nothing may be sent; or
 * the store's failure. */
static int contents_of(const gate_env *g, const id_list *ids, const json_t *recorded, char ***out,
                       char *why, size_t whylen)
{
    char **c = calloc(ids->n ? ids->n : 1, sizeof *c);
    if (!c)
        return STATUS_ENOMEM;
    int rc = STATUS_OK;
    for (size_t i = 0; rc == STATUS_OK && i < ids->n; i++) {
        json_t *a = NULL;
        rc = q_get_artifact(g->st, ids->ids[i], &a);
        const json_t *content = json_object_get(a, "content");
        const char *want = json_string_value(json_object_get(recorded, ids->ids[i]));
        char actual[65];
        if (rc == STATUS_OK && !json_is_string(content))
            rc = STATUS_EPROTO;
        if (rc == STATUS_OK &&
            (want == NULL || *want == '\0' ||
             digest_sha256_hex(json_string_value(content), json_string_length(content), actual) ||
             strcmp(actual, want) != 0)) {
            snprintf(why, whylen,
                     "%.128s's content no longer has the SHA-256 it was recorded with: nothing was "
                     "sent to the model",
                     ids->ids[i]);
            rc = STATUS_EREFUSED;
        }
        if (rc == STATUS_OK && !(c[i] = strdup(json_string_value(content))))
            rc = STATUS_ENOMEM;
        json_decref(a);
    }
    if (rc != STATUS_OK) {
        for (size_t j = 0; j < ids->n; j++)
            free(c[j]);
        free(c);
        return rc;
    }
    *out = c;
    return STATUS_OK;
}

/* One step in progress: what run_step was given, and everything its phases allocate, freed by
 * step_free alone. d is the caller's decision: the one that ends the step. */
typedef struct {
    const gate_env *g;
    const char *run_id, *mode, *ctx_id;
    const workflow_step *ws;
    guard_decision *d;
    exec_state *x;       /* the executor's hold on the run, or NULL (no lease, no budgets) */
    id_list sources;     /* the step's source artifacts, as read */
    id_list all;         /* the handed-off inputs, then the sources: the model's inputs */
    char **contents;     /* the contents of all, in order (all.n of them) */
    json_t *recorded;    /* {id: SHA-256} of each input of all: for a handed-off input the hash
                          * its verified lineage summary names, for a source the one it was
                          * registered with in this step; its content must still have it */
    json_t *by_resource; /* {resource: artifact id} of the step's sources, read or observed:
                          * what a scripted value quoted from a resource names */
    model_reply reply;   /* zeroed until the model answers */
    char *rendered;      /* the public rendering, or NULL */
    json_t *output;      /* the recorded output artifact */
    const char *out_id;  /* its id (borrowed from output) */
    char err[256];
} step_state;

static void step_free(step_state *s)
{
    for (size_t i = 0; s->contents && i < s->all.n; i++)
        free(s->contents[i]);
    free(s->contents);
    json_decref(s->recorded);
    json_decref(s->by_resource);
    id_list_free(&s->sources);
    id_list_free(&s->all);
    model_reply_free(&s->reply);
    free(s->rendered);
    json_decref(s->output);
}

/* Replaces the decision with UNKNOWN GRAPH_ERROR saying why; the step stops. */
static bool step_unknown(step_state *s, const char *why)
{
    guard_decision_free(s->d);
    guard_decision_unknown(s->d, why);
    return false;
}

/* Each phase returns true to go on, or false with the decision that ends the step in s->d. */

/* Handed-off artifacts pass the gate before anything else happens in the step. */
static bool step_check_handoff(step_state *s, const id_list *inputs)
{
    if (inputs->n == 0)
        return true;
    uint64_t seq = 0;
    char(*hashes)[65] = calloc(inputs->n, sizeof *hashes);
    int rc = hashes ? gate_check_input_recorded(s->g, s->ctx_id, (const char *const *)inputs->ids,
                                                inputs->n, s->d, &seq, hashes)
                    : STATUS_ENOMEM;
    for (size_t i = 0; rc == STATUS_OK && s->d->outcome == GUARD_ALLOW && i < inputs->n; i++)
        if (json_object_set_new(s->recorded, inputs->ids[i], json_string(hashes[i])) != 0)
            rc = STATUS_ENOMEM;
    free(hashes);
    if (rc != STATUS_OK) {
        guard_decision_free(s->d);
        guard_decision_unknown(s->d, "the handed-off artifacts could not be checked");
        return false;
    }
    if (s->d->outcome != GUARD_ALLOW)
        return false;
    guard_decision_free(s->d);
    return true;
}

/* The step's sources, each through the source gate. */
static bool step_read_sources(step_state *s)
{
    for (size_t i = 0; i < s->ws->reads.n; i++) {
        json_t *artifact = NULL;
        int rc = gate_read_source(s->g, s->ctx_id, s->ws->reads.items[i], s->d, &artifact);
        const char *id = artifact ? json_string_value(json_object_get(artifact, "id")) : NULL;
        /* Its hash as the creating call wrote it, from the content charterd read. */
        json_t *hash = json_object_get(artifact, "hash");
        bool kept =
            rc == STATUS_OK && s->d->outcome == GUARD_ALLOW && id && json_is_string(hash) &&
            id_list_add(&s->sources, id) == 0 && json_object_set(s->recorded, id, hash) == 0 &&
            json_object_set_new(s->by_resource, s->ws->reads.items[i], json_string(id)) == 0;
        json_decref(artifact);
        if (!kept) {
            if (rc != STATUS_OK || s->d->outcome == GUARD_ALLOW)
                return step_unknown(s, "a source could not be read");
            return false;
        }
        guard_decision_free(s->d);
    }
    return true;
}

/* For a live request, the providers that may receive the gated inputs, in their fallback
 * order; NULL for another mode, or when memory ran out (the note then goes without the list
 * rather than not at all). */
static json_t *live_providers(const char *mode)
{
    if (strcmp(mode, "live") != 0)
        return NULL;
    const char *names[PROVIDER_MAX_CHAIN];
    size_t n = provider_order(names, PROVIDER_MAX_CHAIN);
    json_t *providers = json_array();
    for (size_t i = 0; providers && i < n; i++)
        if (json_array_append_new(providers, json_string(names[i])) != 0) {
            json_decref(providers);
            return NULL;
        }
    return providers;
}

/* The model request: a fixed step and gated artifacts only. */
static bool step_ask_model(step_state *s, const id_list *inputs)
{
    for (size_t i = 0; i < inputs->n; i++)
        if (id_list_add(&s->all, inputs->ids[i]) != 0)
            return step_unknown(s, "out of memory");
    for (size_t i = 0; i < s->sources.n; i++)
        if (id_list_add(&s->all, s->sources.ids[i]) != 0)
            return step_unknown(s, "out of memory");
    char why[256];
    int rc = contents_of(s->g, &s->all, s->recorded, &s->contents, why, sizeof why);
    if (rc != STATUS_OK)
        return step_unknown(
            s, rc == STATUS_EREFUSED ? why : "the inputs could not be read for the model request");
    /* Written before anything is sent. */
    json_t *providers = live_providers(s->mode);
    note_event(s->g, s->run_id, "model_request",
               json_pack("{s:s, s:s, s:s, s:o*, s:o*}", "step", s->ws->cap.step, "context",
                         s->ctx_id, "model", s->mode, "inputs", id_list_json(&s->all), "providers",
                         providers));
    if (!exec_check(s->x, CHECK_MODEL))
        return step_unknown(s, "the run stopped before its model request");
    if (s->x) {
        /* Counted on the run before anything is sent, so a resume from an earlier checkpoint
         * counts this request too (a stop the renewal finds aborts it at once). */
        s->x->model_calls++;
        exec_renew(s->x);
    }
    json_t *fallbacks = json_array();
    if (!fallbacks)
        return step_unknown(s, "out of memory");
    model_request req = {.step = s->ws,
                         .inputs = (const char *const *)s->contents,
                         .n_inputs = s->all.n,
                         .fallbacks = fallbacks};
    if (s->x) {
        req.abort = exec_abort;
        req.abort_arg = s->x;
        if (s->x->max_wall_clock_ms > 0) {
            long long left = s->x->max_wall_clock_ms - ms_since(&s->x->t0);
            req.deadline_ms = left > 0 ? left : 1;
        }
    }
    if (ask_model(s->mode, &req, &s->reply, s->err, sizeof s->err) != 0) {
        /* The providers that failed, when a live request reached any. */
        if (json_array_size(fallbacks) == 0) {
            json_decref(fallbacks);
            fallbacks = NULL;
        }
        note_event(s->g, s->run_id, "model_error",
                   json_pack("{s:s, s:s, s:o*}", "step", s->ws->cap.step, "error", s->err,
                             "fallbacks", fallbacks));
        guard_decision_unknown(s->d, s->err);
        return false;
    }
    /* Which live provider and model answered, after which failed and why. */
    if (s->reply.provider)
        note_event(s->g, s->run_id, "model_reply",
                   json_pack("{s:s, s:s, s:s, s:o}", "step", s->ws->cap.step, "provider",
                             s->reply.provider, "model", s->reply.model ? s->reply.model : "",
                             "fallbacks", fallbacks));
    else
        json_decref(fallbacks);
    return true;
}

/* Public output is rendered by the server from approved fields; the model's free text never
 * reaches a public recipient. The output is recorded through the input gate. */
static bool step_record_output(step_state *s)
{
    if (s->ws->public_template &&
        workflow_render_public(s->ws, s->reply.fields, &s->rendered, s->err, sizeof s->err) != 0) {
        note_event(s->g, s->run_id, "output_rejected",
                   json_pack("{s:s, s:s}", "step", s->ws->cap.step, "error", s->err));
        guard_decision_unknown(s->d, s->err);
        return false;
    }
    const char *text = s->rendered ? s->rendered : s->reply.content;
    int rc = s->all.n == 0
                 ? STATUS_EINVAL
                 : gate_record_output(s->g, s->ctx_id, (const char *const *)s->all.ids, s->all.n,
                                      s->ws->output_title, text, s->d, &s->output);
    s->out_id = s->output ? json_string_value(json_object_get(s->output, "id")) : NULL;
    if (rc != STATUS_OK || s->d->outcome != GUARD_ALLOW || !s->out_id) {
        if (rc != STATUS_OK || s->d->outcome == GUARD_ALLOW)
            return step_unknown(s, "the output could not be recorded");
        return false;
    }
    guard_decision_free(s->d);
    return true;
}

/* A source the step's script observes (scripted runs: the script stands for what a host
 * read), through the observation gate: kept as a source of the step like one it reads. A
 * refused observation ends the step as the decision says. */
static bool step_observe_one(step_state *s, const json_t *o)
{
    const char *resource = json_string_value(json_object_get(o, "resource"));
    const char *content = json_string_value(json_object_get(o, "content"));
    json_t *artifact = NULL;
    char why[256] = "";
    int rc = gate_observe_source(s->g, s->ctx_id, resource, content, strlen(content),
                                 json_string_value(json_object_get(o, "locator")), s->d, &artifact,
                                 why, sizeof why);
    const char *id = artifact ? json_string_value(json_object_get(artifact, "id")) : NULL;
    json_t *hash = json_object_get(artifact, "hash");
    bool kept = rc == STATUS_OK && s->d->outcome == GUARD_ALLOW && id && json_is_string(hash) &&
                id_list_add(&s->sources, id) == 0 && json_object_set(s->recorded, id, hash) == 0 &&
                json_object_set_new(s->by_resource, resource, json_string(id)) == 0;
    json_decref(artifact);
    if (kept) {
        guard_decision_free(s->d);
        return true;
    }
    if (rc == STATUS_EINVAL)
        return step_unknown(s, why);
    if (rc != STATUS_OK || s->d->outcome == GUARD_ALLOW)
        return step_unknown(s, "a source could not be observed");
    return false;
}

/* The script's observations, in a scripted run only: a live run's host observes for itself. */
static bool step_observe(step_state *s)
{
    const json_t *observe = json_object_get(s->ws->script, "observe");
    if (strcmp(s->mode, "scripted") != 0)
        return true;
    for (size_t i = 0; i < json_array_size(observe); i++)
        if (!step_observe_one(s, json_array_get(observe, i)))
            return false;
    return true;
}

/* The arguments of scripted invocation inv, borrowed from it and from s: a value quoted from a
 * resource names the artifact the step recorded from it; a value from the task says so; any
 * other value is one the model wrote, and derives from the step's output (and so from every
 * input of the model request). Returns the count, or -1 when a quote's resource was not
 * recorded in the step. */
static long scripted_arguments(const step_state *s, const json_t *inv, invoke_argument *args,
                               const char **out_ids)
{
    const json_t *list = json_object_get(inv, "arguments");
    size_t n = json_array_size(list);
    for (size_t i = 0; i < n && i < WORKFLOW_MAX_ARGUMENTS; i++) {
        const json_t *a = json_array_get(list, i);
        const char *quote = json_string_value(json_object_get(a, "quoted_from"));
        memset(&args[i], 0, sizeof args[i]);
        args[i].name = json_string_value(json_object_get(a, "name"));
        args[i].value = json_string_value(json_object_get(a, "value"));
        args[i].from_task = json_is_true(json_object_get(a, "from_task"));
        if (quote) {
            args[i].quoted_from = json_string_value(json_object_get(s->by_resource, quote));
            if (!args[i].quoted_from)
                return -1;
        } else if (!args[i].from_task) {
            args[i].lineage = out_ids;
            args[i].n_lineage = 1;
        }
    }
    return (long)n;
}

/* Scripted invocation k of the step through the tool-call gate, under the invocation ID
 * "<run>:<step>:invoke:<k>". An allowed or refused call is the tool's answer and the step goes
 * on (the gate recorded it); an UNKNOWN, or a call the gate could not take, ends the step. */
static bool step_invoke_one(step_state *s, size_t k, const json_t *inv)
{
    if (!exec_check(s->x, CHECK_DELIVERY))
        return step_unknown(s, "the run stopped before a tool call");
    invoke_argument args[WORKFLOW_MAX_ARGUMENTS];
    const char *out_ids[1] = {s->out_id};
    long n = scripted_arguments(s, inv, args, out_ids);
    if (n < 0)
        return step_unknown(s, "a scripted value quotes a resource the step did not record");
    char id[200], why[256] = "";
    snprintf(id, sizeof id, "%.64s:%.64s:invoke:%zu", s->run_id, s->ws->cap.step, k);
    invoke_result r;
    memset(&r, 0, sizeof r);
    int rc = invoke_call(s->g, s->ctx_id, json_string_value(json_object_get(inv, "tool")), id, args,
                         (size_t)n, &r, why, sizeof why);
    if (rc != STATUS_OK) {
        invoke_result_free(&r);
        return step_unknown(s, rc == STATUS_EINVAL ? why : "the tool call could not be decided");
    }
    bool go_on = r.decision.outcome != GUARD_UNKNOWN;
    if (s->x && r.decision.outcome == GUARD_ALLOW && r.delivery && !r.acknowledged)
        s->x->deliveries++;
    if (!go_on) {
        *s->d = r.decision;
        memset(&r.decision, 0, sizeof r.decision);
    }
    invoke_result_free(&r);
    return go_on;
}

/* The script's tool calls, in a scripted run, in order, after the output is recorded. */
static bool step_invoke(step_state *s)
{
    const json_t *invoke = json_object_get(s->ws->script, "invoke");
    if (strcmp(s->mode, "scripted") != 0)
        return true;
    for (size_t k = 0; k < json_array_size(invoke); k++)
        if (!step_invoke_one(s, k, json_array_get(invoke, k)))
            return false;
    return true;
}

/* A status_changed detail naming the approval: {"approval_id","step",key:value}. */
static char *approval_detail(const exec_state *x, const char *id, const char *key,
                             const char *value)
{
    json_t *d = json_pack("{s:s, s:s, s:s}", "approval_id", id, "step", x->step ? x->step : "", key,
                          value ? value : "");
    char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    return text;
}

/* The approval's state as of the database clock ("pending", "approved", "denied", "expired",
 * "refused"), in state (16 bytes); "" when it could not be read. */
static void approval_state(const gate_env *g, const char *id, char state[16])
{
    json_t *r = NULL;
    state[0] = '\0';
    if (q_get_approval(g->st, id, &r) == STATUS_OK) {
        const char *v = json_string_value(json_object_get(json_object_get(r, "approval"), "state"));
        snprintf(state, 16, "%s", v ? v : "");
    }
    json_decref(r);
}

#define RUNNER_APPROVAL_POLL_MS 200 /* a waiting executor reads the approval this often */

/* The executor waits for the human approval approval (held by deliver_send) to be decided:
 * the run shows pending_approval meanwhile, and the thread keeps renewing its lease every
 * poll, so a cancel request, charterd stopping, a lost lease or the wall clock budget end the
 * wait as they end a model request. No RPC worker is held: DecideApproval commits (or refuses)
 * the delivery on its own. Returns true when the approval was decided (the caller learns how
 * by sending again under the same invocation ID), false when the run must stop (x->stop). */
static bool exec_await_approval(exec_state *x, const json_t *approval)
{
    const char *id = json_string_value(json_object_get(approval, "id"));
    if (id == NULL)
        return false;
    char *text = approval_detail(x, id, "approver",
                                 json_string_value(json_object_get(approval, "approver")));
    int rc =
        text ? transition(x->g, x->run_id, x->from, "pending_approval", text, NULL) : STATUS_ENOMEM;
    free(text);
    if (rc != STATUS_OK) {
        exec_stop(x, "lost", "the run could not be marked pending_approval");
        return false;
    }
    char state[16] = "pending";
    while (exec_check(x, CHECK_TICK)) {
        struct timespec pause = {0, RUNNER_APPROVAL_POLL_MS * 1000000L};
        nanosleep(&pause, NULL);
        char now[16];
        approval_state(x->g, id, now);
        if (now[0] != '\0' && strcmp(now, "pending") != 0) {
            snprintf(state, sizeof state, "%s", now);
            break;
        }
    }
    if (strcmp(x->stop, "lost") == 0)
        return false; /* whoever reaped the lease marks the run interrupted */
    text = approval_detail(x, id, "approval", x->stop[0] ? "still pending" : state);
    rc =
        text ? transition(x->g, x->run_id, "pending_approval", x->from, text, NULL) : STATUS_ENOMEM;
    free(text);
    if (rc != STATUS_OK)
        exec_stop(x, "lost", "the run could not leave pending_approval");
    return x->stop[0] == '\0';
}

/* The step's delivery, if it has one, through the delivery protocol. A send held for a human
 * approval is waited for by the executor (exec_await_approval), then sent again under the
 * same invocation ID: approved, the delivery DecideApproval committed is acknowledged;
 * denied, expired or refused, the send is refused (DENY) as any refused send. */
static bool step_deliver(step_state *s)
{
    if (!s->ws->deliver_tool)
        return true;
    if (!exec_check(s->x, CHECK_DELIVERY))
        return step_unknown(s, "the run stopped before its delivery");
    char inv[200];
    snprintf(inv, sizeof inv, "%s:%s:deliver", s->run_id, s->ws->cap.step);
    deliver_result dr;
    int rc = deliver_send(s->g, s->ctx_id, s->out_id, s->ws->deliver_recipient, s->ws->deliver_tool,
                          inv, &dr);
    if (rc == STATUS_OK && s->x && dr.approval && dr.decision.outcome == GUARD_UNKNOWN &&
        exec_await_approval(s->x, dr.approval)) {
        deliver_result_free(&dr);
        rc = deliver_send(s->g, s->ctx_id, s->out_id, s->ws->deliver_recipient, s->ws->deliver_tool,
                          inv, &dr);
    }
    if (rc != STATUS_OK) {
        guard_decision_unknown(s->d, "the delivery could not be attempted");
    } else {
        *s->d = dr.decision;
        memset(&dr.decision, 0, sizeof dr.decision);
        if (s->x && s->d->outcome == GUARD_ALLOW)
            s->x->deliveries++;
        /* The commit itself found the run's delivery budget used up (deliveries made outside
         * this executor's count: another recovery, Gate calls, a resumed run): that ends the
         * run budget_exhausted, as the executor's own check does, recoveries included. */
        if (s->x && strcmp(dr.refused, "budget_deliveries") == 0)
            exec_stop(s->x, "budget_exhausted", "max_deliveries");
    }
    deliver_result_free(&dr);
    return s->d->outcome == GUARD_ALLOW;
}

/* What the step hands on, as the model's reply names it. */
static bool step_hand_on(step_state *s, id_list *handoff)
{
    for (size_t i = 0; i < s->reply.handoff.n; i++) {
        const char *h = s->reply.handoff.items[i];
        if (strcmp(h, "output") == 0 && id_list_add(handoff, s->out_id) != 0)
            return step_unknown(s, "out of memory");
        for (size_t j = 0; strcmp(h, "inputs") == 0 && j < s->all.n; j++)
            if (id_list_add(handoff, s->all.ids[j]) != 0)
                return step_unknown(s, "out of memory");
    }
    return true;
}

/* Runs one step in the context ctx_id with the given inputs (handed-off artifacts): the
 * handoff check, the sources, the model, the output, the delivery, the handoff on. On
 * STEP_DONE, *handoff gets what the step hands on. The decision that ended the step is left in
 * d, and the step ends as that decision says (end_of). */
static step_end run_step(const gate_env *g, const char *run_id, const char *mode,
                         const workflow_step *ws, const char *ctx_id, id_list *inputs,
                         guard_decision *d, id_list *handoff, exec_state *x)
{
    memset(d, 0, sizeof *d);
    step_state s;
    memset(&s, 0, sizeof s);
    s.g = g;
    s.run_id = run_id;
    s.mode = mode;
    s.ctx_id = ctx_id;
    s.ws = ws;
    s.d = d;
    s.x = x;
    if (!(s.recorded = json_object()) || !(s.by_resource = json_object())) {
        guard_decision_unknown(d, "out of memory");
        return end_of(d);
    }
    if (step_check_handoff(&s, inputs) && step_read_sources(&s) && step_observe(&s) &&
        step_ask_model(&s, inputs) && step_record_output(&s) && step_invoke(&s) &&
        step_deliver(&s) && step_hand_on(&s, handoff)) {
        if (d->outcome == 0)
            d->outcome = GUARD_ALLOW;
        /* Only an allowed step hands anything on. */
        INVARIANT(d->outcome == GUARD_ALLOW);
    }
    step_free(&s);
    return end_of(d);
}

static int step_index(const workflow *wf, const char *name)
{
    for (size_t i = 0; i < wf->n_steps; i++)
        if (strcmp(wf->steps[i].cap.step, name) == 0)
            return (int)i;
    return -1;
}

/* Ends the run according to how its last step ended; detail names the step and the codes. */
static void finish(const gate_env *g, const char *run_id, const char *from, step_end end,
                   const char *step, const guard_decision *d)
{
    static const char *status[] = {"completed", "blocked", "error"};
    char codes[256];
    guard_codes_format(d->codes, codes, sizeof codes);
    json_t *detail = json_pack("{s:s, s:s, s:s}", "step", step, "codes", codes, "witness",
                               d->witness ? d->witness : "");
    char *text = detail ? json_dumps(detail, JSON_COMPACT) : NULL;
    json_decref(detail);
    int rc = transition(g, run_id, from, status[end], text, NULL);
    free(text);
    /* The run receipt pins the run's last event as it ended. One that could not be issued now
     * is issued by Evidence/GetReceipt later. */
    if (rc == STATUS_OK && evlog_keyed()) {
        json_t *receipt = NULL;
        (void)receipt_issue_run(g->st, run_id, &receipt, NULL);
        json_decref(receipt);
    }
}

/* Ends a run the executor had to stop: cancelled (with the reason) or budget_exhausted (with
 * the budget), naming the step it was in and the counters. A recovery counts nothing (its
 * counters are the run's, left as they were), so it names none. A run whose lease was lost is
 * left to whoever reaped the lease (it is marked interrupted there). */
static void finish_stopped(const gate_env *g, const char *run_id, exec_state *x)
{
    if (strcmp(x->stop, "lost") == 0)
        return;
    const char *why = strcmp(x->stop, "budget_exhausted") == 0 ? "budget" : "reason";
    json_t *detail =
        x->recovery
            ? json_pack("{s:s, s:s, s:s}", "step", x->step ? x->step : "", why, x->reason, "by",
                        "executor")
            : json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "step", x->step ? x->step : "", why,
                        x->reason, "by", "executor", "steps", (json_int_t)x->steps, "model_calls",
                        (json_int_t)x->model_calls, "deliveries", (json_int_t)x->deliveries,
                        "wall_clock_ms", (json_int_t)ms_since(&x->t0));
    char *text = detail ? json_dumps(detail, JSON_COMPACT) : NULL;
    json_decref(detail);
    int rc = transition(g, run_id, x->from, x->stop, text ? text : "", NULL);
    free(text);
    if (rc == STATUS_OK && evlog_keyed()) {
        json_t *receipt = NULL;
        (void)receipt_issue_run(g->st, run_id, &receipt, NULL);
        json_decref(receipt);
    }
}

/* The cursor before step next: what the finished steps hand on, the counters, the budget,
 * the workflow version and the graph. NULL when out of memory. */
static json_t *cursor_of(const exec_state *x, size_t next, const id_list *handoffs)
{
    const workflow *wf = x->g->wf;
    unsigned char rnd[8];
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        return NULL;
    char id[24];
    snprintf(id, sizeof id, "c%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3],
             rnd[4], rnd[5], rnd[6], rnd[7]);
    json_t *h = json_array();
    for (size_t i = 0; h && i < next; i++)
        if (json_array_append_new(h, id_list_json(&handoffs[i])) != 0) {
            json_decref(h);
            h = NULL;
        }
    if (!h)
        return NULL;
    return json_pack(
        "{s:i, s:s, s:s, s:s, s:s, s:I, s:s, s:o, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I}}",
        "v", 1, "id", id, "graph", store_graph(x->g->st), "run_id", x->run_id, "workflow",
        wf->version, "next_step", (json_int_t)next, "step",
        next < wf->n_steps ? wf->steps[next].cap.step : "", "handoffs", h, "counters", "steps",
        (json_int_t)x->steps, "model_calls", (json_int_t)x->model_calls, "deliveries",
        (json_int_t)x->deliveries, "wall_clock_ms", (json_int_t)ms_since(&x->t0), "budget",
        "max_wall_clock_ms", (json_int_t)x->max_wall_clock_ms, "max_model_calls",
        (json_int_t)x->max_model_calls, "max_steps", (json_int_t)x->max_steps, "max_deliveries",
        (json_int_t)x->max_deliveries);
}

/* Records the run's checkpoint before step next, when charterd has an integrity key (without
 * one nothing can be sealed, and no checkpoint is kept). A checkpoint that could not be
 * written leaves the previous one in place: the run goes on, resumable from there. */
static void exec_checkpoint(exec_state *x, size_t next, const id_list *handoffs)
{
    if (!evlog_keyed())
        return;
    json_t *c = cursor_of(x, next, handoffs);
    char *token = NULL;
    if (c && checkpoint_seal(c, &token) == STATUS_OK) {
        json_t *reply = NULL;
        (void)q_save_checkpoint(x->g->st, x->run_id, x->lease->owner,
                                json_string_value(json_object_get(c, "id")), token, &reply);
        json_decref(reply);
    }
    free(token);
    json_decref(c);
}

/* Fills handoffs from a resumed cursor and returns the step to start at, or -1 when the
 * cursor does not fit the workflow (its handoffs or its step index). */
static long cursor_restore(const json_t *cursor, const workflow *wf, id_list *handoffs)
{
    json_int_t next = json_integer_value(json_object_get(cursor, "next_step"));
    json_t *h = json_object_get(cursor, "handoffs");
    if (next < 0 || (size_t)next > wf->n_steps || !json_is_array(h) ||
        json_array_size(h) != (size_t)next)
        return -1;
    for (size_t i = 0; i < (size_t)next; i++) {
        json_t *ids = json_array_get(h, i), *v;
        size_t k;
        if (!json_is_array(ids))
            return -1;
        json_array_foreach(ids, k, v)
        {
            if (!json_is_string(v) || id_list_add(&handoffs[i], json_string_value(v)) != 0)
                return -1;
        }
    }
    return (long)next;
}

static int drive(const gate_env *g, const char *run_id, const char *mode, exec_state *x,
                 const json_t *cursor)
{
    const workflow *wf = g->wf;
    id_list *handoffs = calloc(wf->n_steps ? wf->n_steps : 1, sizeof *handoffs);
    if (!handoffs)
        return STATUS_ENOMEM;
    step_end end = STEP_DONE;
    guard_decision d = {0};
    const char *last = "";
    size_t first = 0;
    if (cursor) {
        long at = cursor_restore(cursor, wf, handoffs);
        if (at < 0) {
            guard_decision_unknown(&d, "the checkpoint does not fit the run's workflow");
            end = STEP_FAILED;
        } else {
            first = (size_t)at;
        }
    }
    for (size_t i = first; i < wf->n_steps && end == STEP_DONE; i++) {
        const workflow_step *ws = &wf->steps[i];
        last = ws->cap.step;
        guard_decision_free(&d);
        if (x) {
            exec_checkpoint(x, i, handoffs);
            x->step = ws->cap.step;
            if (!exec_check(x, CHECK_STEP)) {
                guard_decision_unknown(&d, "the run stopped");
                end = STEP_FAILED;
                break;
            }
            x->steps++;
        }
        json_t *ctx = NULL;
        int rc = gate_open_step(g, run_id, ws->cap.step, &ctx);
        const char *ctx_id = ctx ? json_string_value(json_object_get(ctx, "id")) : NULL;
        if (rc != STATUS_OK || !ctx_id) {
            json_decref(ctx);
            guard_decision_unknown(&d, "the step could not be opened");
            end = STEP_FAILED;
            break;
        }
        id_list inputs = {0};
        bool gathered = true;
        for (size_t r = 0; r < ws->receives.n && gathered; r++) {
            int from = step_index(wf, ws->receives.items[r]);
            /* A step receives only from steps before it (workflow.c checks the order). */
            INVARIANT(from < 0 || (size_t)from < i);
            for (size_t k = 0; from >= 0 && k < handoffs[from].n && gathered; k++)
                gathered = id_list_add(&inputs, handoffs[from].ids[k]) == 0;
        }
        if (gathered) {
            end = run_step(g, run_id, mode, ws, ctx_id, &inputs, &d, &handoffs[i], x);
        } else {
            guard_decision_unknown(&d, "out of memory");
            end = STEP_FAILED;
        }
        id_list_free(&inputs);
        json_decref(ctx);
    }
    if (x && !x->stop[0] && end != STEP_DONE)
        exec_check(x, CHECK_TICK); /* a step that failed may have been stopped by a cancel */
    if (x && x->stop[0]) {
        finish_stopped(g, run_id, x);
    } else {
        if (x)
            exec_renew(x); /* the final counters go with the run */
        finish(g, run_id, "running", end, last, &d);
    }
    guard_decision_free(&d);
    for (size_t i = 0; i < wf->n_steps; i++)
        id_list_free(&handoffs[i]);
    free(handoffs);
    return STATUS_OK;
}

static int get_run(const gate_env *g, const char *run_id, json_t **view);

/* Creates the run (status created) with a fresh id. */
static int create(const gate_env *g, const char *task, const char *mode, char run_id[65])
{
    if (strcmp(mode, "scripted") != 0 && strcmp(mode, "external") != 0 && strcmp(mode, "live") != 0)
        return STATUS_EINVAL;
    if (task && strlen(task) > 4096)
        return STATUS_EINVAL;
    unsigned char rnd[8];
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        return STATUS_ENOMEM;
    snprintf(run_id, 65, "r%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3],
             rnd[4], rnd[5], rnd[6], rnd[7]);
    /* The run pins the full version of its workflow; every later step resolves it. */
    json_t *arg =
        json_pack("{s:s, s:s, s:s, s:s}", "id", run_id, "task", task && *task ? task : g->wf->task,
                  "mode", mode, "workflow", g->wf->version);
    if (!arg)
        return STATUS_ENOMEM;
    json_t *reply = NULL;
    int rc = evlog_create_run(g->st, arg, &reply);
    json_decref(arg);
    json_decref(reply);
    return rc;
}

int runner_start(const gate_env *g, const char *task, const char *mode, char run_id[65])
{
    if (!mode || !*mode)
        mode = "scripted";
    int rc = create(g, task, mode, run_id);
    if (rc != STATUS_OK)
        return rc;
    if (strcmp(mode, "external") == 0)
        return STATUS_OK;
    rc = transition(g, run_id, "created", "running", "{\"by\":\"runner\"}", NULL);
    if (rc != STATUS_OK)
        return STATUS_OK; /* created but not started; the run's status says so */
    return drive(g, run_id, mode, NULL, NULL);
}

int runner_submit(const gate_env *g, const char *task, const char *mode, const json_t *budget,
                  char run_id[65])
{
    if (!mode || !*mode)
        mode = "scripted";
    int rc = create(g, task, mode, run_id);
    if (rc != STATUS_OK || strcmp(mode, "external") == 0)
        return rc;
    rc = transition(g, run_id, "created", "queued", "{\"by\":\"CreateRun\"}", NULL);
    if (rc != STATUS_OK)
        return STATUS_OK; /* created but not queued; the run's status says so */
    json_t *empty = budget ? NULL : json_object();
    char *text = json_dumps(budget ? budget : empty, JSON_COMPACT);
    json_decref(empty);
    if (!text)
        return STATUS_ENOMEM;
    json_t *reply = NULL;
    rc = q_enqueue_run(g->st, run_id, text, &reply);
    free(text);
    json_decref(reply);
    return rc;
}

/* The cursor a resume queued the run from (ResumeRun consumed it), opened again from the
 * run's checkpoint under the integrity key; its counters become x's, its wall clock moves x's
 * start back. *cursor stays NULL for a run not resumed. *why is set when the run was resumed
 * but its checkpoint cannot be used here (no key, not its latest, altered since). */
static int resume_cursor(const gate_env *g, const char *run_id, exec_state *x, json_t **cursor,
                         const char **why)
{
    json_t *r = NULL;
    int rc = q_get_checkpoint(g->st, run_id, &r);
    if (rc != STATUS_OK) {
        json_decref(r);
        return rc;
    }
    const char *from = json_string_value(json_object_get(r, "resume_from"));
    const char *id = json_string_value(json_object_get(r, "checkpoint_id"));
    const char *token = json_string_value(json_object_get(r, "token"));
    if (from == NULL || *from == '\0') {
        json_decref(r);
        return STATUS_OK;
    }
    json_t *c = NULL;
    int orc = checkpoint_open(token, &c);
    if (orc == STATUS_ENOKEY)
        *why = "INTEGRITY_KEY_REQUIRED: the run was resumed from a checkpoint, and this charterd "
               "has no integrity key to verify it";
    else if (orc != STATUS_OK || id == NULL || strcmp(from, id) != 0 ||
             !json_equal(json_object_get(c, "id"), json_object_get(r, "checkpoint_id")) ||
             !json_equal(json_object_get(c, "run_id"), json_object_get(r, "run_id")) ||
             !json_equal(json_object_get(c, "workflow"), json_object_get(r, "workflow")) ||
             strcmp(json_string_value(json_object_get(c, "graph"))
                        ? json_string_value(json_object_get(c, "graph"))
                        : "",
                    store_graph(g->st)) != 0)
        *why = "the checkpoint the run was resumed from no longer verifies";
    json_int_t sent = json_integer_value(json_object_get(r, "model_calls"));
    json_decref(r);
    if (*why) {
        json_decref(c);
        return STATUS_OK;
    }
    json_t *k = json_object_get(c, "counters");
    x->steps = json_integer_value(json_object_get(k, "steps"));
    x->model_calls = json_integer_value(json_object_get(k, "model_calls"));
    /* Requests sent after the checkpoint (one in flight when the executor stopped) count. */
    if (sent > x->model_calls)
        x->model_calls = sent;
    x->deliveries = json_integer_value(json_object_get(k, "deliveries"));
    long long wall = json_integer_value(json_object_get(k, "wall_clock_ms"));
    x->t0.tv_sec -= (time_t)(wall / 1000);
    x->t0.tv_nsec -= (long)(wall % 1000) * 1000000L;
    if (x->t0.tv_nsec < 0) {
        x->t0.tv_sec--;
        x->t0.tv_nsec += 1000000000L;
    }
    *cursor = c;
    return STATUS_OK;
}

int runner_execute(const gate_env *g, const char *run_id, const runner_lease *lease)
{
    exec_state x;
    exec_init(&x, g, run_id, lease, "running");
    json_t *view = NULL;
    int rc = get_run(g, run_id, &view);
    const char *m = json_string_value(json_object_get(json_object_get(view, "run"), "mode"));
    char mode[16];
    snprintf(mode, sizeof mode, "%s", m && strcmp(m, "live") == 0 ? "live" : "scripted");
    json_decref(view);
    json_t *cursor = NULL;
    const char *why = NULL;
    if (rc == STATUS_OK)
        rc = resume_cursor(g, run_id, &x, &cursor, &why);
    if (rc == STATUS_OK)
        rc = transition(g, run_id, "queued", "running",
                        cursor ? "{\"by\":\"executor\",\"from\":\"checkpoint\"}"
                               : "{\"by\":\"executor\"}",
                        NULL);
    if (rc == STATUS_OK && why) {
        /* A resume this process cannot verify or apply ends the run in error, saying why. */
        json_t *d = json_pack("{s:s, s:s}", "by", "executor", "reason", why);
        char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
        json_decref(d);
        (void)transition(g, run_id, "running", "error", text ? text : "", NULL);
        free(text);
    } else if (rc == STATUS_OK) {
        exec_renew(&x);
        rc = drive(g, run_id, mode, &x, cursor);
    }
    json_decref(cursor);
    json_t *reply = NULL;
    (void)q_release_lease(g->st, run_id, lease->owner, &reply); /* else it lapses */
    json_decref(reply);
    return rc;
}

/* Artifacts of the run that may feed the recovery step: all but the recovery step's own
 * outputs, in creation order. */
static int recovery_candidates(const json_t *view, const char *step, id_list *out)
{
    json_t *arts = json_object_get(view, "artifacts");
    size_t i;
    json_t *a;
    json_array_foreach(arts, i, a)
    {
        const char *id = json_string_value(json_object_get(a, "id"));
        const char *astep = json_string_value(json_object_get(a, "step"));
        if (!id || (astep && strcmp(astep, step) == 0))
            continue;
        if (id_list_add(out, id))
            return STATUS_ENOMEM;
    }
    return STATUS_OK;
}

/* Keeps the candidates whose ancestry passes the step's input gate on their own; *excluded
 * gets the others with the codes and witness that excluded them. */
static int permitted_inputs(const gate_env *g, const char *ctx_id, const id_list *cand,
                            id_list *out, json_t *excluded)
{
    for (size_t i = 0; i < cand->n; i++) {
        guard_decision d;
        const char *one[1] = {cand->ids[i]};
        int rc = gate_evaluate_input(g, ctx_id, one, 1, &d);
        if (rc != STATUS_OK || d.outcome == GUARD_UNKNOWN) {
            guard_decision_free(&d);
            return rc == STATUS_OK ? STATUS_EUNAVAILABLE : rc;
        }
        if (d.outcome == GUARD_ALLOW) {
            rc = id_list_add(out, cand->ids[i]) ? STATUS_ENOMEM : STATUS_OK;
        } else {
            char codes[256];
            guard_codes_format(d.codes, codes, sizeof codes);
            json_array_append_new(excluded,
                                  json_pack("{s:s, s:s, s:s}", "id", cand->ids[i], "codes", codes,
                                            "witness", d.witness ? d.witness : ""));
        }
        guard_decision_free(&d);
        if (rc != STATUS_OK)
            return rc;
    }
    return STATUS_OK;
}

static int get_run(const gate_env *g, const char *run_id, json_t **view)
{
    return q_get_run(g->st, run_id, "0", "1", NULL, NULL, NULL, view);
}

/* The recovery of a run already claimed (status recovering): opens a fresh recovery-step
 * context, gathers the run's artifacts whose ancestry passes the step's input gate, asks the
 * model, renders the public output and delivers it, then ends the run as the step ended. x is
 * the executor's lease on the run, or NULL (the caller's own thread, no lease). */
static void recover_claimed(const gate_env *g, const char *run_id, const workflow_step *ws,
                            exec_state *x, runner_recovery *out)
{
    json_t *view = NULL;
    json_t *ctx = NULL;
    id_list cand = {0}, inputs = {0}, handoff = {0};
    step_end end = STEP_FAILED;
    if (x)
        x->step = ws->cap.step;
    int rc = get_run(g, run_id, &view);
    if (rc == STATUS_OK)
        rc = recovery_candidates(view, ws->cap.step, &cand);
    if (rc == STATUS_OK)
        rc = gate_open_step(g, run_id, ws->cap.step, &ctx);
    const char *ctx_id = ctx ? json_string_value(json_object_get(ctx, "id")) : NULL;
    json_t *excluded = json_array();
    if (rc == STATUS_OK && ctx_id)
        rc = excluded ? permitted_inputs(g, ctx_id, &cand, &inputs, excluded) : STATUS_ENOMEM;
    const char *mode = json_string_value(json_object_get(json_object_get(view, "run"), "mode"));
    if (!mode || strcmp(mode, "external") == 0)
        mode = "scripted";
    if (rc == STATUS_OK && ctx_id && inputs.n > 0) {
        note_event(g, run_id, "recovery_inputs",
                   json_pack("{s:s, s:s, s:o*, s:O}", "step", ws->cap.step, "context", ctx_id,
                             "inputs", id_list_json(&inputs), "excluded", excluded));
        /* The permitted inputs were each checked; run_step checks them together again. */
        end = run_step(g, run_id, mode, ws, ctx_id, &inputs, &out->decision, &handoff, x);
    } else {
        guard_decision_unknown(&out->decision, inputs.n == 0 && rc == STATUS_OK
                                                   ? "no permitted inputs for the recovery step"
                                                   : "the graph could not supply the run");
    }
    if (x && !x->stop[0] && end != STEP_DONE)
        exec_check(x, CHECK_TICK); /* a step that failed may have been stopped by a cancel */
    if (x && x->stop[0])
        finish_stopped(g, run_id, x);
    else
        finish(g, run_id, "recovering", end, ws->cap.step, &out->decision);
    json_decref(excluded);
    id_list_free(&cand);
    id_list_free(&inputs);
    id_list_free(&handoff);
    json_decref(ctx);
    json_decref(view);
}

/* Claims run_id for a recovery under its pinned workflow: through claim (evlog_transition to
 * recovering, or evlog_request_recovery, which also queues it). A completed run is
 * acknowledged. *ws gets the recovery step. */
static int recovery_claim(gate_env *pinned, const char *run_id, bool queue,
                          const workflow_step **ws, runner_recovery *out)
{
    memset(out, 0, sizeof *out);
    /* A run recovers under the workflow version it was created with, whatever g->wf is. */
    int pin = registry_run_workflow(pinned->st, run_id, &pinned->wf);
    if (pin != STATUS_OK)
        return pin;
    *ws = workflow_recovery_step(pinned->wf);
    if (!*ws)
        return STATUS_EREFUSED;
    char current[32] = "";
    evlog_sealed sealed;
    memset(&sealed, 0, sizeof sealed);
    int rc = queue ? evlog_request_recovery(pinned->st, run_id, "{\"by\":\"recovery\"}", &sealed,
                                            current)
                   : evlog_transition(pinned->st, run_id, "blocked,interrupted,error", "recovering",
                                      "{\"by\":\"recovery\"}", &sealed, current);
    if (rc == STATUS_EREFUSED && strcmp(current, "completed") == 0) {
        /* Already delivered: acknowledge the receipt, deliver nothing. */
        out->decision.outcome = GUARD_ALLOW;
        out->acknowledged = true;
        return STATUS_OK;
    }
    if (rc == STATUS_EREFUSED)
        snprintf(out->status, sizeof out->status, "%s", current);
    if (rc == STATUS_OK)
        out->claim_seq = sealed.seq;
    return rc;
}

int runner_recover(const gate_env *g, const char *run_id, runner_recovery *out)
{
    gate_env pinned = *g;
    const workflow_step *ws = NULL;
    int rc = recovery_claim(&pinned, run_id, false, &ws, out);
    if (rc == STATUS_OK && !out->acknowledged)
        recover_claimed(&pinned, run_id, ws, NULL, out);
    return rc;
}

int runner_request_recovery(const gate_env *g, const char *run_id, runner_recovery *out)
{
    gate_env pinned = *g;
    const workflow_step *ws = NULL;
    int rc = recovery_claim(&pinned, run_id, true, &ws, out);
    if (rc == STATUS_OK && !out->acknowledged)
        out->queued = true;
    return rc;
}

int runner_execute_recovery(const gate_env *g, const char *run_id, const runner_lease *lease)
{
    exec_state x;
    exec_init(&x, g, run_id, lease, "recovering");
    x.recovery = true;
    runner_recovery rec;
    memset(&rec, 0, sizeof rec);
    const workflow_step *ws = workflow_recovery_step(g->wf);
    if (!ws) {
        guard_decision_unknown(&rec.decision, "the run's workflow has no recovery step");
        finish(g, run_id, "recovering", STEP_FAILED, "", &rec.decision);
    } else if (exec_check(&x, CHECK_STEP)) {
        recover_claimed(g, run_id, ws, &x, &rec);
    } else {
        x.step = ws->cap.step;
        finish_stopped(g, run_id, &x);
    }
    guard_decision_free(&rec.decision);
    json_t *reply = NULL;
    (void)q_release_lease(g->st, run_id, lease->owner, &reply); /* else it lapses */
    json_decref(reply);
    return STATUS_OK;
}
