/*
 * mcp_live.c - the live tools of a step served over MCP: "observe" records what the agent read
 * from one of the step's observed resources (Gate/ObserveSource), and each tool with arguments
 * the step lists becomes an MCP tool of its own name that invokes it (Gate/Invoke).
 *
 * The agent names each argument's value and, at most, where it came from: quoted_from an
 * artifact this session was shown (charterd checks the artifact holds the value) or from_task
 * (charterd checks the run's task holds it). Otherwise the value is one the model wrote, and
 * its lineage is everything this session was shown: what the model could have drawn it from
 * (charterd checks that one of those artifacts holds it).
 * The invocation ID is charter-mcp's, derived from the context, the tool and the arguments, so
 * the same call asked again is the same invocation (acknowledged, never a second effect).
 *
 * A tool the workflow maps onto a downstream server's tool ("server", "downstream_tool") is
 * called there only after charterd allowed the invocation, once; its answer is observed under
 * the tool's result resource and passes the step's input gate before the agent sees it
 * (mcp_downstream.c speaks to the server).
 */
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

#define MAX_OBSERVED (1024 * 1024) /* an observed resource's max_bytes is at most 1 MiB */
#define MAX_VALUE 4096
#define MAX_ARGUMENTS 32

/* The workflow's resource entry id when it is observed, else NULL. */
static const json_t *observed_resource(const mcp_server *srv, const char *id)
{
    size_t i;
    const json_t *r;
    json_array_foreach(json_object_get(srv->workflow, "resources"), i, r)
    {
        const char *rid = json_string_value(json_object_get(r, "id"));
        if (rid && strcmp(rid, id) == 0)
            return json_object_get(r, "observed") ? r : NULL;
    }
    return NULL;
}

/* Whether a tool of the workflow mapped onto a downstream server returns its result under
 * resource id: what is observed under it is what that server answered, read by charter-mcp. */
static bool returned_by_server(const mcp_server *srv, const char *id)
{
    const char *name;
    const json_t *t;
    json_object_foreach(json_object_get(srv->workflow, "tools"), name, t)
    {
        const char *result = json_string_value(json_object_get(t, "result"));
        if (result != NULL && strcmp(result, id) == 0 && json_object_get(t, "server") != NULL)
            return true;
    }
    return false;
}

/* The step's observed resources the agent may observe, as a JSON array of ids (new reference).
 * A resource a downstream tool returns under is not one: its labels are the server's answer's,
 * and an agent that could observe it would write that answer itself (a trusted bill printing
 * the IBAN an injected mail asked for, a confidential document observed as the inbox). */
static json_t *step_observed(const mcp_server *srv)
{
    json_t *out = json_array();
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(srv->step, "resources"), i, v)
    {
        const char *id = json_string_value(v);
        if (id != NULL && observed_resource(srv, id) && !returned_by_server(srv, id))
            json_array_append_new(out, json_string(id));
    }
    return out;
}

/* The declaration of tool name when it is a live tool (one with arguments) of the step. */
static const json_t *step_live_tool(const mcp_server *srv, const char *name)
{
    const json_t *t = json_object_get(json_object_get(srv->workflow, "tools"), name);
    if (!json_is_array(json_object_get(t, "arguments")))
        return NULL;
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(srv->step, "tools"), i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
            return t;
    }
    return NULL;
}

static json_t *observe_schema(const mcp_server *srv)
{
    json_t *p = json_pack(
        "{s:o, s:{s:s, s:o, s:s}, s:{s:s, s:i, s:i, s:s}, s:{s:s, s:i, s:i, s:s}}", "context_id",
        mcp_id_schema("The context_id open_step returned to this session."), "resource_id", "type",
        "string", "enum", step_observed(srv), "description",
        "An observed resource of this step: its labels are the resource's, whatever the content "
        "says.",
        "content", "type", "string", "minLength", 1, "maxLength", MAX_OBSERVED, "description",
        "What was read, exactly (at most the resource's max_bytes).", "locator", "type", "string",
        "minLength", 1, "maxLength", 1024, "description",
        "Where it was read: a URL, a message id, a row key.");
    return mcp_object_schema(p, NULL);
}

/* One argument's schema: its value and, at most, one origin. */
static json_t *argument_schema(const json_t *decl)
{
    const char *role = json_string_value(json_object_get(decl, "role"));
    char what[256];
    snprintf(what, sizeof what,
             "A %s argument. Without quoted_from or from_task the value is taken as written by "
             "the model from everything shown to this session.",
             role ? role : "?");
    static const char *const required[] = {"value", NULL};
    json_t *s = mcp_object_schema(
        json_pack("{s:{s:s, s:i, s:i}, s:o, s:{s:s, s:s}}", "value", "type", "string", "minLength",
                  1, "maxLength", MAX_VALUE, "quoted_from",
                  mcp_id_schema("An artifact shown to this session whose content holds the value "
                                "exactly: the value keeps that artifact's labels."),
                  "from_task", "type", "boolean", "description",
                  "true: the value is the human's own words in the run's task."),
        required);
    if (s)
        json_object_set_new(s, "description", json_string(what));
    return s;
}

static json_t *invoke_schema(const json_t *decl)
{
    json_t *args = json_object();
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(decl, "arguments"), i, a)
    {
        const char *name = json_string_value(json_object_get(a, "name"));
        if (name)
            json_object_set_new(args, name, argument_schema(a));
    }
    return mcp_object_schema(
        json_pack("{s:o, s:o}", "context_id",
                  mcp_id_schema("The context_id open_step returned to this session."), "arguments",
                  mcp_object_schema(args, NULL)),
        NULL);
}

json_t *mcp_live_list(const mcp_server *srv)
{
    json_t *list = json_array();
    json_t *observed = step_observed(srv);
    if (list && json_array_size(observed) > 0)
        json_array_append_new(
            list, json_pack("{s:s, s:s, s:o}", "name", "observe", "description",
                            "Record what you read from one of this step's observed resources "
                            "(a page, a mail, a row): it becomes a source shown to this session.",
                            "inputSchema", observe_schema(srv)));
    json_decref(observed);
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(srv->step, "tools"), i, v)
    {
        const char *name = json_string_value(v);
        const json_t *decl = name ? step_live_tool(srv, name) : NULL;
        char what[256];
        snprintf(what, sizeof what,
                 "Call %.64s. Each argument names its value and where it came from; charterd "
                 "decides from the lineage of every value.",
                 name ? name : "");
        if (decl && list)
            json_array_append_new(list, json_pack("{s:s, s:s, s:o}", "name", name, "description",
                                                  what, "inputSchema", invoke_schema(decl)));
    }
    return list;
}

/* RecordOutput of content under title in the session's context, derived from inputs (n): on
 * allow the output's id into id (48 bytes) and, when artifact is not NULL, its metadata into
 * *artifact. Returns NULL, or the refusal. */
static json_t *record_as_output(mcp_server *srv, mcp_session *s, char **inputs, size_t n,
                                const char *title, const char *content, char *id, json_t **artifact)
{
    Charter__V1__RecordOutputRequest req = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    req.context_id = s->context_id;
    req.input_ids = inputs;
    req.n_input_ids = n;
    req.title = (char *)title;
    req.content = (char *)content;
    Charter__V1__RecordOutputResponse *resp = NULL;
    charter_status st;
    int rc = charter_record_output(srv->client, &req, &resp, &st);
    if (rc != 0)
        return mcp_rpc_refusal(rc, &st);
    json_t *r = NULL;
    if (resp->decision && resp->decision->outcome == CHARTER__V1__OUTCOME__ALLOW &&
        resp->artifact) {
        snprintf(id, 48, "%s", resp->artifact->id);
        if (artifact != NULL)
            *artifact = mcp_artifact_json(resp->artifact, false);
    } else {
        r = mcp_result(mcp_decision_json(resp->decision), true);
    }
    charter__v1__record_output_response__free_unpacked(resp, NULL);
    return r;
}

/* ---- observe ----------------------------------------------------------------------------- */

/* The observed source (id) as the model reported it, once the session was shown anything: the
 * model wrote the content, and could have drawn it from what it was shown (an injected IBAN
 * typed into a trusted bill, a confidential memo pasted as a public page). So what is shown
 * to the session in its place is an output of the step derived from the source and from
 * everything shown before, carrying the labels of all of them, as any value the model writes
 * (record_value). Its id into out (48 bytes) and, when it is not the source, its artifact
 * into *artifact. Returns NULL, or a refusal. */
static json_t *observed_as_written(mcp_server *srv, mcp_session *s, const char *id,
                                   const char *resource, const char *content, char *out,
                                   json_t **artifact)
{
    snprintf(out, 48, "%s", id);
    *artifact = NULL;
    if (s->n_shown == 0)
        return NULL;
    char **inputs = calloc(s->n_shown + 1, sizeof *inputs);
    if (inputs == NULL)
        return mcp_refusal("unknown", "GRAPH_ERROR", "out of memory");
    memcpy(inputs, s->shown, s->n_shown * sizeof *inputs);
    inputs[s->n_shown] = (char *)id;
    char title[128];
    snprintf(title, sizeof title, "observed from %.64s, as the agent reported it", resource);
    json_t *r = record_as_output(srv, s, inputs, s->n_shown + 1, title, content, out, artifact);
    free(inputs);
    return r;
}

static json_t *t_observe(mcp_server *srv, mcp_session *s, const json_t *args)
{
    json_t *r = mcp_need_context(srv, s, args);
    if (r)
        return r;
    const json_t *content = json_object_get(args, "content");
    if (strlen(json_string_value(content)) != json_string_length(content))
        return mcp_refusal("deny", "ARGUMENT_INVALID", "arguments.content: holds a NUL byte");
    /* Such a step records nothing the model writes (observed_as_written could not derive). */
    if (s->n_shown > 0 && srv->public_render)
        return mcp_refusal("deny", "ARGUMENT_INVALID",
                           "observe: in a step whose output is rendered from a template, observe "
                           "what the agent reads before anything else is shown to it");
    Charter__V1__ObserveSourceRequest req = CHARTER__V1__OBSERVE_SOURCE_REQUEST__INIT;
    req.context_id = s->context_id;
    req.resource_id = (char *)json_string_value(json_object_get(args, "resource_id"));
    req.content = (char *)json_string_value(content);
    req.locator = (char *)json_string_value(json_object_get(args, "locator"));
    Charter__V1__ObserveSourceResponse *resp = NULL;
    charter_status st;
    int rc = charter_observe_source(srv->client, &req, &resp, &st);
    if (rc != 0)
        return mcp_rpc_refusal(rc, &st);
    bool ok =
        resp->decision && resp->decision->outcome == CHARTER__V1__OUTCOME__ALLOW && resp->artifact;
    char shown[48] = "";
    json_t *artifact = NULL;
    json_t *refused = ok ? observed_as_written(srv, s, resp->artifact->id, req.resource_id,
                                               req.content, shown, &artifact)
                         : NULL;
    if (refused) {
        charter__v1__observe_source_response__free_unpacked(resp, NULL);
        return refused;
    }
    json_t *body = mcp_decision_json(resp->decision);
    /* What the agent read is shown to it: the lineage of what it writes from here on. */
    if (ok && mcp_shown_add(s, shown) != 0)
        ok = false, json_object_set_new(body, "decision", json_string("unknown"));
    if (ok && artifact == NULL)
        artifact = mcp_artifact_json(resp->artifact, false);
    if (ok && body)
        json_object_set_new(body, "artifact", artifact);
    else
        json_decref(artifact);
    charter__v1__observe_source_response__free_unpacked(resp, NULL);
    return mcp_result(body, !ok);
}

/* ---- invoke ------------------------------------------------------------------------------ */

/* The invocation ID of this call: "mcp:" and 40 hex digits of the SHA-256 over the context,
 * the tool and the arguments (keys sorted), so the same call asked again is one invocation. */
static int invocation_id(const mcp_session *s, const char *tool, const json_t *args, char out[48])
{
    json_t *what =
        json_pack("{s:s, s:s, s:O}", "context", s->context_id, "tool", tool, "arguments", args);
    char *text = what ? json_dumps(what, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(what);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    int ok = text && EVP_Digest(text, strlen(text), md, &len, EVP_sha256(), NULL) == 1 && len >= 20;
    free(text);
    if (!ok)
        return -1;
    memcpy(out, "mcp:", 4);
    for (size_t i = 0; i < 20; i++)
        snprintf(out + 4 + 2 * i, 3, "%02x", md[i]);
    return 0;
}

/* A value the model wrote (no origin named) is recorded as an output of the step first, derived
 * from everything shown to the session: charterd then finds the value in an artifact of its
 * lineage, and the artifact carries the labels of all the model could have drawn it from. In a
 * step whose output is rendered from a template nothing the model writes is recorded: the
 * lineage is then what was shown, and charterd refuses a value none of it holds. The output's
 * id into id (48 bytes), or "" when nothing was recorded. Returns NULL, or a refusal. */
static json_t *record_value(mcp_server *srv, mcp_session *s, const char *name, const char *value,
                            char *id)
{
    id[0] = '\0';
    if (srv->public_render)
        return NULL;
    char title[96];
    snprintf(title, sizeof title, "value of argument %.64s", name);
    return record_as_output(srv, s, s->shown, s->n_shown, title, value, id, NULL);
}

/* Fills the request's arguments from args (checked against the schema already). A value with
 * no origin is recorded as the step's output (record_value), its lineage. Returns NULL, or a
 * refusal. */
static json_t *fill_arguments(mcp_server *srv, mcp_session *s, const json_t *args,
                              Charter__V1__InvokeArgument *a, Charter__V1__InvokeArgument **list,
                              char (*ids)[48], char **lineage, size_t *n)
{
    const char *name;
    json_t *v;
    *n = 0;
    json_object_foreach((json_t *)args, name, v)
    {
        if (*n == MAX_ARGUMENTS)
            return mcp_refusal("deny", "ARGUMENT_INVALID", "arguments: too many arguments");
        const char *value = json_string_value(json_object_get(v, "value"));
        const char *quote = json_string_value(json_object_get(v, "quoted_from"));
        bool task = json_is_true(json_object_get(v, "from_task"));
        char w[320];
        if (strlen(value) != json_string_length(json_object_get(v, "value")))
            return snprintf(w, sizeof w, "arguments.%.64s.value: holds a NUL byte", name),
                   mcp_refusal("deny", "ARGUMENT_INVALID", w);
        if (quote && task)
            return snprintf(w, sizeof w,
                            "arguments.%.64s: quoted_from and from_task both given: a value "
                            "comes from one place",
                            name),
                   mcp_refusal("deny", "ARGUMENT_INVALID", w);
        if (quote && !mcp_shown_has(s, quote))
            return snprintf(w, sizeof w,
                            "arguments.%.64s.quoted_from: not an artifact shown to this session",
                            name),
                   mcp_refusal("deny", "ARGUMENT_INVALID", w);
        if (!quote && !task && s->n_shown == 0)
            return snprintf(w, sizeof w,
                            "arguments.%.64s: nothing was shown to this session, so a value "
                            "written here has no lineage: name quoted_from or from_task",
                            name),
                   mcp_refusal("deny", "ARGUMENT_INVALID", w);
        Charter__V1__InvokeArgument init = CHARTER__V1__INVOKE_ARGUMENT__INIT;
        a[*n] = init;
        a[*n].name = (char *)name;
        a[*n].value = (char *)value;
        a[*n].from_task = task;
        a[*n].quoted_from = quote ? (char *)quote : "";
        if (!quote && !task) {
            json_t *r = record_value(srv, s, name, value, ids[*n]);
            if (r)
                return r;
            lineage[*n] = ids[*n];
            a[*n].lineage = ids[*n][0] ? &lineage[*n] : s->shown;
            a[*n].n_lineage = ids[*n][0] ? 1 : s->n_shown;
        }
        list[*n] = &a[*n];
        (*n)++;
    }
    return NULL;
}

/* The decision, the destination class and the committed effect of an invocation. */
static json_t *invoke_body(const Charter__V1__InvokeResponse *resp, const char *inv)
{
    json_t *body = mcp_decision_json(resp->decision);
    if (!body)
        return NULL;
    json_object_set_new(body, "invocation_id", json_string(inv));
    json_object_set_new(body, "destination", json_string(resp->destination));
    json_object_set_new(body, "acknowledged", json_boolean(resp->acknowledged));
    const Charter__V1__Delivery *d = resp->delivery;
    if (d)
        json_object_set_new(body, "effect",
                            json_pack("{s:s, s:s, s:s, s:s, s:f}", "invocation_id",
                                      d->invocation_id, "recipient", d->recipient, "tool", d->tool,
                                      "content", d->content, "committed_at", d->committed_at));
    return body;
}

/* ---- tools of a downstream server ------------------------------------------------------- */

/* Sets the body's decision, codes and witness to a later stage's (stage names it). */
static void set_stage(json_t *body, const char *stage, const char *outcome, const char *code,
                      const char *witness)
{
    json_object_set_new(body, "stage", json_string(stage));
    json_object_set_new(body, "decision", json_string(outcome));
    json_object_set_new(body, "codes", json_pack("[s]", code));
    json_object_set_new(body, "witness", json_string(witness));
}

/* Copies a later stage's decision (stage names it) into the body; whether it allowed. */
static bool take_stage(json_t *body, const char *stage, const Charter__V1__Decision *d)
{
    json_t *dj = mcp_decision_json(d);
    const char *k;
    json_t *v;
    json_object_foreach(dj, k, v) json_object_set(body, k, v);
    json_decref(dj);
    json_object_set_new(body, "stage", json_string(stage));
    return d && d->outcome == CHARTER__V1__OUTCOME__ALLOW;
}

/* The input gate of the session's step over artifact id: whether it allowed (then the artifact
 * is shown to the session); the decision is in body. */
static bool admit_result(mcp_server *srv, mcp_session *s, const char *id, json_t *body)
{
    Charter__V1__CheckInputRequest req = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
    char *ids[1] = {(char *)id};
    req.context_id = s->context_id;
    req.artifact_ids = ids;
    req.n_artifact_ids = 1;
    Charter__V1__CheckInputResponse *resp = NULL;
    charter_status st;
    int rc = charter_check_input(srv->client, &req, &resp, &st);
    if (rc != 0) {
        char w[320];
        snprintf(w, sizeof w, "charterd: %s", st.message[0] ? st.message : "no answer");
        set_stage(body, "input", "unknown", charter_status_name(rc), w);
        return false;
    }
    bool ok = take_stage(body, "input", resp->decision);
    charter__v1__check_input_response__free_unpacked(resp, NULL);
    if (ok && mcp_shown_add(s, id) != 0) {
        set_stage(body, "input", "unknown", "TOO_MANY_SHOWN",
                  "the session holds as many shown artifacts as it may");
        return false;
    }
    return ok;
}

/* The downstream result observed under the tool's result resource (Gate/ObserveSource), where
 * it was read being the call itself; whether it was allowed. The decision is in body, and on
 * allow the artifact's id in *id (owned by the caller). */
static bool observe_result(mcp_server *srv, mcp_session *s, const json_t *decl, const char *text,
                           const char *inv, json_t *body, char **id)
{
    char locator[512];
    snprintf(locator, sizeof locator, "mcp://%.64s/%.128s?invocation=%s",
             json_string_value(json_object_get(decl, "server")),
             json_string_value(json_object_get(decl, "downstream_tool")), inv);
    Charter__V1__ObserveSourceRequest req = CHARTER__V1__OBSERVE_SOURCE_REQUEST__INIT;
    req.context_id = s->context_id;
    req.resource_id = (char *)json_string_value(json_object_get(decl, "result"));
    req.content = (char *)text;
    req.locator = locator;
    Charter__V1__ObserveSourceResponse *resp = NULL;
    charter_status st;
    *id = NULL;
    int rc = charter_observe_source(srv->client, &req, &resp, &st);
    if (rc != 0) {
        char w[320];
        snprintf(w, sizeof w, "charterd: %s", st.message[0] ? st.message : "no answer");
        set_stage(body, "observe", "unknown", charter_status_name(rc), w);
        return false;
    }
    bool ok = take_stage(body, "observe", resp->decision) && resp->artifact;
    if (ok) {
        json_object_set_new(body, "artifact", mcp_artifact_json(resp->artifact, false));
        *id = strdup(resp->artifact->id);
        ok = *id != NULL;
    }
    charter__v1__observe_source_response__free_unpacked(resp, NULL);
    return ok;
}

/* What the agent gets of a downstream answer: with a result resource, the text once it is
 * observed and admitted by the step's input gate, and refused (with its size) when it is larger
 * than the resource takes; without one, only whether the call went through. */
static json_t *downstream_result(mcp_server *srv, mcp_session *s, const json_t *decl,
                                 const mcp_downstream_answer *a, const char *inv, json_t *body)
{
    const char *res = json_string_value(json_object_get(decl, "result"));
    if (!res) {
        json_object_set_new(body, "result_withheld", json_true());
        return mcp_result(body, a->is_error);
    }
    const json_t *r = observed_resource(srv, res);
    json_int_t max =
        json_integer_value(json_object_get(json_object_get(r, "observed"), "max_bytes"));
    char w[512];
    if (a->bytes > (size_t)max) {
        snprintf(w, sizeof w,
                 "the result of %.64s is %zu bytes; resource %.64s takes at most %lld bytes: it "
                 "is not shown",
                 json_string_value(json_object_get(decl, "downstream_tool")), a->bytes, res,
                 (long long)max);
        set_stage(body, "observe", "deny", "RESULT_TOO_LARGE", w);
        return mcp_result(body, true);
    }
    if (strlen(a->text) != a->bytes) {
        set_stage(body, "observe", "deny", "RESULT_INVALID",
                  "the result holds a NUL byte: it is not shown");
        return mcp_result(body, true);
    }
    if (a->bytes == 0) {
        set_stage(body, "observe", "deny", "RESULT_EMPTY",
                  "the downstream tool returned no text: nothing to observe");
        return mcp_result(body, true);
    }
    char *id = NULL;
    bool ok =
        observe_result(srv, s, decl, a->text, inv, body, &id) && admit_result(srv, s, id, body);
    free(id);
    if (ok)
        json_object_set_new(body, "content", json_string(a->text));
    return mcp_result(body, !ok || a->is_error);
}

/* The downstream outcomes of the latest invocations this process called (a ring, any session),
 * so that a retry charterd acknowledges says what is known of the earlier call, never more. */
enum { OUTCOMES_KEPT = 256 };
static struct {
    char inv[48];
    char outcome[16]; /* "in_flight", then ok, error, unknown or not_called */
} outcomes[OUTCOMES_KEPT];
static size_t outcomes_next;
static pthread_mutex_t outcomes_lock = PTHREAD_MUTEX_INITIALIZER;

static void outcome_record(const char *inv, const char *outcome)
{
    pthread_mutex_lock(&outcomes_lock);
    size_t i = 0;
    while (i < OUTCOMES_KEPT && strcmp(outcomes[i].inv, inv) != 0)
        i++;
    if (i == OUTCOMES_KEPT)
        i = outcomes_next++ % OUTCOMES_KEPT;
    snprintf(outcomes[i].inv, sizeof outcomes[i].inv, "%s", inv);
    snprintf(outcomes[i].outcome, sizeof outcomes[i].outcome, "%s", outcome);
    pthread_mutex_unlock(&outcomes_lock);
}

/* The outcome recorded for inv, or "unknown" (an earlier process, or one long forgotten). */
static void outcome_recall(const char *inv, char *out, size_t len)
{
    pthread_mutex_lock(&outcomes_lock);
    snprintf(out, len, "unknown");
    for (size_t i = 0; i < OUTCOMES_KEPT; i++)
        if (outcomes[i].inv[0] && strcmp(outcomes[i].inv, inv) == 0)
            snprintf(out, len, "%s", outcomes[i].outcome);
    pthread_mutex_unlock(&outcomes_lock);
}

/* An invocation charterd acknowledged (committed by an earlier call) is not sent again: the
 * answer says it was committed, and what this process recorded of the earlier call's
 * downstream outcome, or that it is unknown; never that it was sent when that is not known. */
static json_t *acknowledged_call(const char *inv, json_t *ds, json_t *body)
{
    char earlier[16], why[256];
    outcome_recall(inv, earlier, sizeof earlier);
    bool known = strcmp(earlier, "unknown") != 0;
    snprintf(why, sizeof why,
             "this invocation was committed by an earlier call, whose downstream outcome %s%s: "
             "it is not sent again",
             known ? "was " : "is unknown", known ? earlier : "");
    json_object_set_new(ds, "called", json_false());
    json_object_set_new(ds, "earlier_outcome", json_string(earlier));
    json_object_set_new(ds, "why", json_string(why));
    return mcp_result(body, false);
}

/* After charterd allowed a mapped tool: the downstream call, once (an acknowledged invocation
 * was already committed and is not sent again), and its answer through the gates. */
static json_t *call_downstream(mcp_server *srv, mcp_session *s, const json_t *decl,
                               json_t *call_args, const char *inv, json_t *body)
{
    json_t *ds =
        json_pack("{s:s, s:s}", "server", json_string_value(json_object_get(decl, "server")),
                  "tool", json_string_value(json_object_get(decl, "downstream_tool")));
    json_object_set_new(body, "downstream", ds);
    if (json_is_true(json_object_get(body, "acknowledged"))) {
        json_decref(call_args);
        return acknowledged_call(inv, ds, body);
    }
    mcp_downstream_answer a;
    outcome_record(inv, "in_flight");
    int rc = mcp_downstream_call(srv, decl, call_args, &a);
    json_object_set_new(ds, "called", json_boolean(a.sent));
    outcome_record(inv, rc != 0      ? (a.answered ? "error"
                                        : a.sent   ? "unknown"
                                                   : "not_called")
                        : a.is_error ? "error"
                                     : "ok");
    if (rc != 0) {
        /* Only a tool with an effect commits under its invocation (the body's effect): a
         * retry of it is acknowledged and never sent. A tool without one commits nothing, and
         * the same call made again asks the server again: its witness must not say otherwise. */
        bool committed = json_object_get(body, "effect") != NULL;
        const char *outcome = a.answered ? "an error" : a.sent ? "unknown" : "that it never ran";
        char w[1024];
        if (committed)
            snprintf(w, sizeof w,
                     "invocation %s is committed; %s; the downstream outcome is %s, and the call "
                     "is not sent again",
                     inv, a.error, outcome);
        else
            snprintf(w, sizeof w,
                     "invocation %s of a tool without an effect committed nothing; %s; the "
                     "downstream outcome is %s; this call is not repeated, and the same call "
                     "made again asks the server again",
                     inv, a.error, outcome);
        json_object_set_new(ds, "outcome",
                            json_string(a.answered ? "error"
                                        : a.sent   ? "unknown"
                                                   : "not_called"));
        set_stage(body, "downstream", "unknown", "DOWNSTREAM_FAILED", w);
        return mcp_result(body, true);
    }
    json_object_set_new(ds, "outcome", json_string(a.is_error ? "error" : "ok"));
    json_object_set_new(ds, "bytes", json_integer((json_int_t)a.bytes));
    if (a.other_items > 0)
        json_object_set_new(ds, "non_text_items_left_out", json_integer((json_int_t)a.other_items));
    json_t *r = downstream_result(srv, s, decl, &a, inv, body);
    free(a.text);
    return r;
}

static json_t *t_invoke(mcp_server *srv, mcp_session *s, const char *tool, const json_t *decl,
                        const json_t *args)
{
    json_t *r = mcp_need_context(srv, s, args);
    if (r)
        return r;
    Charter__V1__InvokeArgument a[MAX_ARGUMENTS];
    Charter__V1__InvokeArgument *list[MAX_ARGUMENTS];
    char ids[MAX_ARGUMENTS][48];
    char *lineage[MAX_ARGUMENTS];
    size_t n = 0;
    const json_t *given = json_object_get(args, "arguments");
    if ((r = fill_arguments(srv, s, given, a, list, ids, lineage, &n)) != NULL)
        return r;
    json_t *call_args = NULL;
    bool mapped = json_object_get(decl, "server") != NULL;
    if (mapped && (r = mcp_downstream_prepare(srv, tool, decl, given, &call_args)) != NULL)
        return r;
    char inv[48];
    if (invocation_id(s, tool, given, inv) != 0)
        return json_decref(call_args), NULL;
    Charter__V1__InvokeRequest req = CHARTER__V1__INVOKE_REQUEST__INIT;
    req.context_id = s->context_id;
    req.tool = (char *)tool;
    req.invocation_id = inv;
    req.arguments = list;
    req.n_arguments = n;
    Charter__V1__InvokeResponse *resp = NULL;
    charter_status st;
    int rc = charter_invoke(srv->client, &req, &resp, &st);
    if (rc != 0)
        return json_decref(call_args), mcp_rpc_refusal(rc, &st);
    bool ok = resp->decision && resp->decision->outcome == CHARTER__V1__OUTCOME__ALLOW;
    json_t *body = invoke_body(resp, inv);
    charter__v1__invoke_response__free_unpacked(resp, NULL);
    if (ok && mapped && body)
        return call_downstream(srv, s, decl, call_args, inv, body);
    json_decref(call_args);
    return mcp_result(body, !ok);
}

int mcp_live_call(mcp_server *srv, mcp_session *s, const char *name, const json_t *args,
                  json_t **result)
{
    json_t *schema = NULL;
    const json_t *decl = NULL;
    bool observe = strcmp(name, "observe") == 0;
    if (observe) {
        json_t *observed = step_observed(srv);
        bool any = json_array_size(observed) > 0;
        json_decref(observed);
        if (!any)
            return 0;
        schema = observe_schema(srv);
    } else if ((decl = step_live_tool(srv, name)) != NULL) {
        schema = invoke_schema(decl);
    } else if (json_is_array(json_object_get(
                   json_object_get(json_object_get(srv->workflow, "tools"), name), "arguments"))) {
        char w[256];
        snprintf(w, sizeof w, "tool %.64s is not a tool of step %.64s", name, srv->step_name);
        *result = mcp_refusal("deny", "TOOL_NOT_PERMITTED", w);
        return 1;
    } else {
        return 0;
    }
    char err[320];
    if (!schema)
        *result = NULL;
    else if (mcp_check_args(schema, args, err, sizeof err) != 0)
        *result = mcp_refusal("deny", "ARGUMENT_INVALID", err);
    else
        *result = observe ? t_observe(srv, s, args) : t_invoke(srv, s, name, decl, args);
    json_decref(schema);
    return 1;
}
