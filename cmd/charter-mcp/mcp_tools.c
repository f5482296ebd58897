/*
 * mcp_tools.c - the MCP tools of one workflow step, derived from the step's capability in the
 * workflow definition, each one call (or a few) of charterd's Gate and Runs services.
 *
 * What the model may choose is only what the input schemas let it name: a run to join, a
 * resource or artifact to read, the step's output, a recipient among the step's own. The actor,
 * grant, tool, invocation ID and provenance are charter-mcp's: the context is the one this
 * session opened, the parents of an output are exactly the artifacts this session was shown
 * after charterd's input gate admitted them, and every decision is charterd's. A refusal is a
 * tool result (isError true) carrying {decision, codes, witness}, never a protocol error, so an
 * agent can go on. Metadata tools (get_run, trace_artifact) never return content.
 */
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

#define MAX_CONTENT 65536
#define MAX_IDS 64

/* ---- results ---------------------------------------------------------------------------- */

/* A tool result whose structured content is body (stolen); text is its JSON. */
json_t *mcp_result(json_t *body, bool is_error)
{
    if (!body)
        return NULL;
    char *text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    json_t *r = text ? json_pack("{s:[{s:s, s:s}], s:o, s:b}", "content", "type", "text", "text",
                                 text, "structuredContent", body, "isError", is_error)
                     : NULL;
    if (!text)
        json_decref(body);
    free(text);
    return r;
}

/* A refusal: outcome "deny" (a rule refused) or "unknown" (facts or charterd missing). */
json_t *mcp_refusal(const char *outcome, const char *code, const char *witness)
{
    return mcp_result(
        json_pack("{s:s, s:[s], s:s}", "decision", outcome, "codes", code, "witness", witness),
        true);
}

json_t *mcp_rpc_refusal(int rc, const charter_status *st)
{
    char witness[320];
    snprintf(witness, sizeof witness, "charterd: %s", st->message[0] ? st->message : "no answer");
    return mcp_refusal("unknown", charter_status_name(rc), witness);
}

static const char *outcome_name(Charter__V1__Outcome o)
{
    return o == CHARTER__V1__OUTCOME__ALLOW  ? "allow"
           : o == CHARTER__V1__OUTCOME__DENY ? "deny"
                                             : "unknown";
}

/* {decision, codes, witness} of a charterd decision (a missing one is unknown). */
static json_t *decision_json(const Charter__V1__Decision *d)
{
    json_t *codes = json_array();
    for (size_t i = 0; d && codes && i < d->n_codes; i++)
        json_array_append_new(codes, json_string(d->codes[i]));
    return json_pack("{s:s, s:o*, s:s}", "decision", d ? outcome_name(d->outcome) : "unknown",
                     "codes", codes, "witness", d && d->witness ? d->witness : "");
}

static bool allowed(const Charter__V1__Decision *d)
{
    return d && d->outcome == CHARTER__V1__OUTCOME__ALLOW;
}

static json_t *strs_json(char **v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

json_t *mcp_event_json(const Charter__V1__Event *e)
{
    json_t *o = json_pack("{s:I, s:s, s:o*, s:s}", "seq", (json_int_t)e->seq, "kind", e->kind,
                          "codes", strs_json(e->codes, e->n_codes), "witness", e->witness);
    if (o && e->outcome != CHARTER__V1__OUTCOME__OUTCOME_UNSPECIFIED)
        json_object_set_new(o, "outcome", json_string(outcome_name(e->outcome)));
    return o;
}

/* Metadata and hashes of an artifact; content only when with_content. */
static json_t *artifact_json(const Charter__V1__Artifact *a, bool with_content)
{
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:o*, s:o*}", "id", a->id, "kind", a->kind,
                  "title", a->title, "conf", a->conf, "integrity", a->integrity, "hash", a->hash,
                  "step", a->step, "parents", strs_json(a->parents, a->n_parents), "resources",
                  strs_json(a->resources, a->n_resources));
    if (o && with_content)
        json_object_set_new(o, "content", json_string(a->content));
    return o;
}

/* ---- the step ---------------------------------------------------------------------------- */

static bool json_strs_has(const json_t *arr, const char *s)
{
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v) if (json_is_string(v) &&
                                      strcmp(json_string_value(v), s) == 0) return true;
    return false;
}

static bool step_has_tool(const mcp_server *srv, const char *tool)
{
    return json_strs_has(json_object_get(srv->step, "tools"), tool);
}

/* The steps whose "receives" names this step, as a JSON array of names (new reference). */
static json_t *receivers(const mcp_server *srv)
{
    json_t *out = json_array();
    size_t i;
    const json_t *st;
    json_array_foreach(json_object_get(srv->workflow, "steps"), i,
                       st) if (json_strs_has(json_object_get(st, "receives"), srv->step_name))
        json_array_append_new(out, json_string(json_string_value(json_object_get(st, "name"))));
    return out;
}

/* ---- input schemas and their check -------------------------------------------------------- */

json_t *mcp_id_schema(const char *what)
{
    return json_pack("{s:s, s:i, s:i, s:s}", "type", "string", "minLength", 1, "maxLength", 128,
                     "description", what);
}

static json_t *id_schema(const char *what)
{
    return mcp_id_schema(what);
}

/* An object schema of the given properties (stolen); every property is required. */
json_t *mcp_object_schema(json_t *props, const char *const *required)
{
    json_t *req = json_array();
    if (!props || !req) {
        json_decref(props);
        json_decref(req);
        return NULL;
    }
    const char *k;
    json_t *v;
    if (required == NULL)
        json_object_foreach(props, k, v) json_array_append_new(req, json_string(k));
    for (size_t i = 0; required != NULL && required[i] != NULL; i++)
        json_array_append_new(req, json_string(required[i]));
    return json_pack("{s:s, s:o, s:o, s:b}", "type", "object", "properties", props, "required", req,
                     "additionalProperties", 0);
}

static json_t *object_schema(json_t *props)
{
    return mcp_object_schema(props, NULL);
}

static json_t *ctx_props(void)
{
    return json_pack("{s:o}", "context_id",
                     id_schema("The context_id open_step returned to this session."));
}

/* The boolean and integer cases of check (type says which). */
static int check_scalar(const json_t *schema, const json_t *value, const char *path, char *err,
                        size_t errlen)
{
    if (strcmp(json_string_value(json_object_get(schema, "type")), "boolean") == 0) {
        if (!json_is_boolean(value))
            return snprintf(err, errlen, "%s: must be true or false", path), -1;
        return 0;
    }
    if (!json_is_integer(value))
        return snprintf(err, errlen, "%s: must be an integer", path), -1;
    json_int_t n = json_integer_value(value);
    const json_t *lo = json_object_get(schema, "minimum");
    const json_t *hi = json_object_get(schema, "maximum");
    if ((lo && n < json_integer_value(lo)) || (hi && n > json_integer_value(hi)))
        return snprintf(err, errlen, "%s: out of bounds", path), -1;
    return 0;
}

/* Checks value against the subset of JSON Schema these tools use (object with required
 * properties and no others, string with length bounds or enum, integer, boolean, array of such).
 * Returns 0, or -1 with err naming the field and the rule. Field names the client sent are never
 * echoed. */
static int check(const json_t *schema, const json_t *value, const char *path, char *err,
                 size_t errlen)
{
    const char *type = json_string_value(json_object_get(schema, "type"));
    if (strcmp(type, "object") == 0) {
        if (!json_is_object(value))
            return snprintf(err, errlen, "%s: must be an object", path), -1;
        const json_t *props = json_object_get(schema, "properties");
        const char *k;
        json_t *v;
        /* Every field sent is one of the schema's and checked against it (optional ones
         * too); then every required one must be there. */
        json_object_foreach((json_t *)value, k, v)
        {
            const json_t *ps = json_object_get(props, k);
            if (!ps)
                return snprintf(err, errlen,
                                "%s: a field outside the tool's schema was sent "
                                "(additionalProperties is false)",
                                path),
                       -1;
            char sub[160];
            snprintf(sub, sizeof sub, "%s.%s", path, k);
            if (check(ps, v, sub, err, errlen) != 0)
                return -1;
        }
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(schema, "required"), i, r)
        {
            const char *name = json_string_value(r);
            if (!json_object_get(value, name))
                return snprintf(err, errlen, "%s.%s: required", path, name), -1;
        }
        return 0;
    }
    if (strcmp(type, "array") == 0) {
        if (!json_is_array(value))
            return snprintf(err, errlen, "%s: must be an array", path), -1;
        json_int_t lo = json_integer_value(json_object_get(schema, "minItems"));
        json_int_t hi = json_integer_value(json_object_get(schema, "maxItems"));
        if ((json_int_t)json_array_size(value) < lo || (json_int_t)json_array_size(value) > hi)
            return snprintf(err, errlen, "%s: %lld to %lld items", path, (long long)lo,
                            (long long)hi),
                   -1;
        size_t i;
        json_t *v;
        json_array_foreach(value, i, v)
        {
            char sub[160];
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            if (check(json_object_get(schema, "items"), v, sub, err, errlen) != 0)
                return -1;
        }
        return 0;
    }
    if (strcmp(type, "boolean") == 0 || strcmp(type, "integer") == 0)
        return check_scalar(schema, value, path, err, errlen);
    if (!json_is_string(value))
        return snprintf(err, errlen, "%s: must be a string", path), -1;
    const json_t *en = json_object_get(schema, "enum");
    if (en && !json_strs_has(en, json_string_value(value)))
        return snprintf(err, errlen, "%s: not one of the allowed values", path), -1;
    size_t n = json_string_length(value);
    const json_t *lo = json_object_get(schema, "minLength");
    const json_t *hi = json_object_get(schema, "maxLength");
    if ((lo && (json_int_t)n < json_integer_value(lo)) ||
        (hi && (json_int_t)n > json_integer_value(hi)))
        return snprintf(err, errlen, "%s: length out of bounds", path), -1;
    return 0;
}

/* ---- session facts ----------------------------------------------------------------------- */

static json_t *need_run(const mcp_session *s)
{
    if (s->run_id[0])
        return NULL;
    return mcp_refusal("deny", "NO_RUN",
                       "this session has no run: call start_run or join_run first");
}

/* The context_id argument must be the context this session opened; anything else (another
 * role's context, a made-up one) is refused. */
static json_t *need_context(const mcp_server *srv, const mcp_session *s, const json_t *args)
{
    if (!s->context_id[0])
        return mcp_refusal("deny", "STEP_NOT_OPEN",
                           "this session has not opened its step: call "
                           "open_step first");
    const char *ctx = json_string_value(json_object_get(args, "context_id"));
    if (!ctx || strcmp(ctx, s->context_id) != 0) {
        char w[256];
        snprintf(w, sizeof w, "context_id is not the context this process opened for step %s",
                 srv->step_name);
        return mcp_refusal("deny", "STEP_MISMATCH", w);
    }
    return NULL;
}

static bool shown_has(const mcp_session *s, const char *id)
{
    for (size_t i = 0; i < s->n_shown; i++)
        if (strcmp(s->shown[i], id) == 0)
            return true;
    return false;
}

static int shown_add(mcp_session *s, const char *id)
{
    if (shown_has(s, id))
        return 0;
    if (s->n_shown == MCP_MAX_SHOWN)
        return -1;
    s->shown[s->n_shown] = strdup(id);
    if (!s->shown[s->n_shown])
        return -1;
    s->n_shown++;
    return 0;
}

static void shown_clear(mcp_session *s)
{
    for (size_t i = 0; i < s->n_shown; i++)
        free(s->shown[i]);
    s->n_shown = 0;
}

/* The session run's view (limit events); NULL and *fail set when charterd refuses. */
/* What of the artifacts' content a view carries: none (metadata, hashes and edges), one
 * artifact's (only that artifact), or every artifact's. */
typedef enum { VIEW_NO_CONTENT, VIEW_ONE, VIEW_ALL } view_content;

/* Moves page's artifacts to the end of v's, and v's artifacts_next to page's. False when
 * memory ran out (nothing moved). */
static bool view_take_artifacts(Charter__V1__RunView *v, Charter__V1__RunView *page)
{
    size_t n = v->n_artifacts + page->n_artifacts;
    Charter__V1__Artifact **all = realloc(v->artifacts, (n ? n : 1) * sizeof *all);
    if (all == NULL)
        return false;
    memcpy(all + v->n_artifacts, page->artifacts, page->n_artifacts * sizeof *all);
    v->artifacts = all;
    v->n_artifacts = n;
    page->n_artifacts = 0;
    v->artifacts_next = page->artifacts_next;
    return true;
}

static Charter__V1__RunView *run_view_of(mcp_server *srv, const char *run_id, uint32_t limit,
                                         view_content what, const char *only, json_t **fail)
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = (char *)run_id;
    req.limit = limit;
    req.without_content = what == VIEW_NO_CONTENT;
    req.artifact_id = what == VIEW_ONE && only ? (char *)only : "";
    Charter__V1__RunView *v = NULL;
    charter_status st;
    int rc = charter_get_run(srv->client, &req, &v, &st);
    if (rc != 0) {
        *fail = mcp_rpc_refusal(rc, &st);
        return NULL;
    }
    /* Artifacts come in pages of at most limit: the rest of the run's are appended to v. */
    while (what != VIEW_ONE && v->artifacts_next != 0) {
        req.artifacts_after = v->artifacts_next;
        Charter__V1__RunView *page = NULL;
        if ((rc = charter_get_run(srv->client, &req, &page, &st)) != 0 ||
            !view_take_artifacts(v, page)) {
            *fail = rc != 0 ? mcp_rpc_refusal(rc, &st)
                            : mcp_refusal("unknown", "INTERNAL", "out of memory reading the run");
            charter__v1__run_view__free_unpacked(page, NULL);
            charter__v1__run_view__free_unpacked(v, NULL);
            return NULL;
        }
        charter__v1__run_view__free_unpacked(page, NULL);
    }
    return v;
}

/* The session run's view without artifact content (limit events). */
static Charter__V1__RunView *run_view(mcp_server *srv, const char *run_id, uint32_t limit,
                                      json_t **fail)
{
    return run_view_of(srv, run_id, limit, VIEW_NO_CONTENT, NULL, fail);
}

static const Charter__V1__Artifact *view_artifact(const Charter__V1__RunView *v, const char *id)
{
    for (size_t i = 0; id && i < v->n_artifacts; i++)
        if (strcmp(v->artifacts[i]->id, id) == 0)
            return v->artifacts[i];
    return NULL;
}

json_t *mcp_decision_json(const Charter__V1__Decision *d)
{
    return decision_json(d);
}

json_t *mcp_artifact_json(const Charter__V1__Artifact *a, bool with_content)
{
    return artifact_json(a, with_content);
}

json_t *mcp_need_context(const mcp_server *srv, const mcp_session *s, const json_t *args)
{
    return need_context(srv, s, args);
}

bool mcp_shown_has(const mcp_session *s, const char *id)
{
    return shown_has(s, id);
}

int mcp_shown_add(mcp_session *s, const char *id)
{
    return shown_add(s, id);
}

int mcp_check_args(const json_t *schema, const json_t *args, char *err, size_t errlen)
{
    return check(schema, args, "arguments", err, errlen);
}

/* ---- tools ------------------------------------------------------------------------------- */

static json_t *t_start_run(mcp_server *srv, mcp_session *s, const json_t *args)
{
    (void)args;
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = "external";
    req.workflow = srv->version;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    int rc = charter_create_run(srv->client, &req, &v, &st);
    if (rc != 0)
        return mcp_rpc_refusal(rc, &st);
    /* Of a one-step workflow, this session drives the whole run: it completes it when it
     * ends (mcp_session.c). Of a longer one, the session of the last step does. */
    if (srv->last_step)
        mcp_started_add(srv, s, v->run->id);
    snprintf(s->run_id, sizeof s->run_id, "%s", v->run->id);
    s->context_id[0] = s->output_id[0] = '\0';
    shown_clear(s);
    json_t *body = json_pack("{s:s, s:s, s:s, s:s}", "decision", "allow", "run_id", v->run->id,
                             "status", v->run->status, "workflow", v->run->workflow);
    charter__v1__run_view__free_unpacked(v, NULL);
    return mcp_result(body, false);
}

static json_t *t_join_run(mcp_server *srv, mcp_session *s, const json_t *args)
{
    json_t *fail = NULL;
    Charter__V1__RunView *v =
        run_view(srv, json_string_value(json_object_get(args, "run_id")), 1, &fail);
    if (!v)
        return fail;
    json_t *r;
    if (strcmp(v->run->workflow, srv->version) != 0) {
        r = mcp_refusal("deny", "WORKFLOW_MISMATCH",
                        "the run follows another workflow version than this process serves");
    } else {
        snprintf(s->run_id, sizeof s->run_id, "%s", v->run->id);
        s->context_id[0] = s->output_id[0] = '\0';
        shown_clear(s);
        /* The session of the workflow's last step ends the run it joined (mcp_session.c). */
        if (srv->last_step)
            mcp_started_add(srv, s, v->run->id);
        r = mcp_result(json_pack("{s:s, s:s, s:s}", "decision", "allow", "run_id", v->run->id,
                                 "status", v->run->status),
                       false);
    }
    charter__v1__run_view__free_unpacked(v, NULL);
    return r;
}

static json_t *t_open_step(mcp_server *srv, mcp_session *s, const json_t *args)
{
    (void)args;
    json_t *r = need_run(s);
    if (r)
        return r;
    Charter__V1__OpenStepRequest req = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    req.run_id = s->run_id;
    req.step = (char *)srv->step_name;
    Charter__V1__StepContext *c = NULL;
    charter_status st;
    int rc = charter_open_step(srv->client, &req, &c, &st);
    if (rc != 0)
        return mcp_rpc_refusal(rc, &st);
    /* A new context starts with nothing shown: provenance is per context. */
    snprintf(s->context_id, sizeof s->context_id, "%s", c->context_id);
    s->output_id[0] = '\0';
    shown_clear(s);
    r = mcp_result(json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o*, s:o*, s:o*}", "decision",
                             "allow", "context_id", c->context_id, "run_id", c->run_id, "step",
                             c->step, "actor", c->actor, "grant", c->grant, "tools",
                             strs_json(c->tools, c->n_tools), "recipients",
                             strs_json(c->recipients, c->n_recipients), "resources",
                             strs_json(c->resources, c->n_resources)),
                   false);
    charter__v1__step_context__free_unpacked(c, NULL);
    return r;
}

static json_t *t_list_sources(mcp_server *srv, mcp_session *s, const json_t *args)
{
    json_t *r = need_context(srv, s, args);
    if (r)
        return r;
    json_t *sources = json_array();
    size_t i;
    const json_t *res;
    json_array_foreach(json_object_get(srv->workflow, "resources"), i, res)
    {
        const char *id = json_string_value(json_object_get(res, "id"));
        if (id && json_strs_has(json_object_get(srv->step, "resources"), id))
            json_array_append_new(sources,
                                  json_pack("{s:s, s:O?, s:O?}", "resource_id", id, "title",
                                            json_object_get(res, "title"), "confidentiality",
                                            json_object_get(res, "confidentiality")));
    }
    /* Artifacts of the steps this one receives: ids and titles, to read with read_artifact. */
    json_t *fail = NULL;
    Charter__V1__RunView *v = run_view(srv, s->run_id, 1, &fail);
    if (!v) {
        json_decref(sources);
        return fail;
    }
    json_t *inputs = json_array();
    for (size_t k = 0; k < v->n_artifacts; k++) {
        const Charter__V1__Artifact *a = v->artifacts[k];
        if (json_strs_has(json_object_get(srv->step, "receives"), a->step))
            json_array_append_new(inputs,
                                  json_pack("{s:s, s:s, s:s, s:s}", "artifact_id", a->id, "step",
                                            a->step, "kind", a->kind, "title", a->title));
    }
    charter__v1__run_view__free_unpacked(v, NULL);
    return mcp_result(
        json_pack("{s:s, s:o, s:o}", "decision", "allow", "sources", sources, "inputs", inputs),
        false);
}

static json_t *t_read_source(mcp_server *srv, mcp_session *s, const json_t *args)
{
    json_t *r = need_context(srv, s, args);
    if (r)
        return r;
    Charter__V1__ReadSourceRequest req = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    req.context_id = s->context_id;
    req.resource_id = (char *)json_string_value(json_object_get(args, "resource_id"));
    Charter__V1__ReadSourceResponse *resp = NULL;
    charter_status st;
    int rc = charter_read_source(srv->client, &req, &resp, &st);
    if (rc != 0)
        return mcp_rpc_refusal(rc, &st);
    json_t *body = decision_json(resp->decision);
    bool ok = allowed(resp->decision) && resp->artifact;
    if (ok && shown_add(s, resp->artifact->id) != 0)
        ok = false, json_object_set_new(body, "decision", json_string("unknown"));
    if (ok && body)
        json_object_set_new(body, "artifact", artifact_json(resp->artifact, true));
    charter__v1__read_source_response__free_unpacked(resp, NULL);
    return mcp_result(body, !ok);
}

/* The input gate of this session's step over one artifact of the session's run; on allow the
 * artifact is shown (added to the session's provenance) and returned with its content. Returns
 * the decision body, or NULL with *fail set to a tool result when charterd did not answer (or
 * NULL too when out of memory). */
static json_t *admit(mcp_server *srv, mcp_session *s, const Charter__V1__Artifact *a, bool *ok,
                     json_t **fail)
{
    *ok = false;
    *fail = NULL;
    Charter__V1__CheckInputRequest req = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
    char *ids[1] = {a->id};
    req.context_id = s->context_id;
    req.artifact_ids = ids;
    req.n_artifact_ids = 1;
    Charter__V1__CheckInputResponse *resp = NULL;
    charter_status st;
    int rc = charter_check_input(srv->client, &req, &resp, &st);
    if (rc != 0) {
        *fail = mcp_rpc_refusal(rc, &st);
        return NULL;
    }
    json_t *body = decision_json(resp->decision);
    if (body && allowed(resp->decision) && shown_add(s, a->id) == 0) {
        *ok = true;
        json_object_set_new(body, "artifact", artifact_json(a, true));
    } else if (body) {
        json_object_set_new(body, "artifact_id", json_string(a->id));
    }
    charter__v1__check_input_response__free_unpacked(resp, NULL);
    return body;
}

static json_t *t_read_artifact(mcp_server *srv, mcp_session *s, const json_t *args)
{
    json_t *r = need_context(srv, s, args);
    if (r)
        return r;
    json_t *fail = NULL;
    const char *wanted = json_string_value(json_object_get(args, "artifact_id"));
    Charter__V1__RunView *v = run_view_of(srv, s->run_id, 1, VIEW_ONE, wanted, &fail);
    if (!v)
        return fail;
    const Charter__V1__Artifact *a = view_artifact(v, wanted);
    if (!a) {
        r = mcp_refusal("deny", "ARTIFACT_NOT_IN_RUN", "artifact_id names no artifact of this run");
    } else {
        bool ok;
        json_t *fail2 = NULL;
        json_t *body = admit(srv, s, a, &ok, &fail2);
        r = body ? mcp_result(body, !ok) : fail2;
    }
    charter__v1__run_view__free_unpacked(v, NULL);
    return r;
}

static json_t *t_submit_output(mcp_server *srv, mcp_session *s, const json_t *args)
{
    json_t *r = need_context(srv, s, args);
    if (r)
        return r;
    if (s->n_shown == 0)
        return mcp_refusal(
            "deny", "NO_PERMITTED_INPUTS",
            "this session holds no artifact admitted by the input gate into its step: "
            "read a source or an artifact first");
    /* A public step sends only the chosen values: charterd renders the text from the step's
     * template, so nothing the model wrote reaches a public recipient. */
    Charter__V1__RecordOutputRequest req = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    Charter__V1__RecordOutputRequest__FieldsEntry entries[32];
    Charter__V1__RecordOutputRequest__FieldsEntry *fields[32];
    req.context_id = s->context_id;
    req.input_ids = s->shown;
    req.n_input_ids = s->n_shown;
    req.title = (char *)json_string_value(json_object_get(srv->step, "output_title"));
    if (srv->public_render) {
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(args, "fields"), k, v)
        {
            if (req.n_fields == 32)
                return mcp_refusal("deny", "ARGUMENT_INVALID", "arguments.fields: at most 32");
            charter__v1__record_output_request__fields_entry__init(&entries[req.n_fields]);
            entries[req.n_fields].key = (char *)k;
            entries[req.n_fields].value = (char *)json_string_value(v);
            fields[req.n_fields] = &entries[req.n_fields];
            req.n_fields++;
        }
        req.fields = fields;
    } else {
        req.content = (char *)json_string_value(json_object_get(args, "content"));
    }
    Charter__V1__RecordOutputResponse *resp = NULL;
    charter_status st;
    int rc = charter_record_output(srv->client, &req, &resp, &st);
    if (rc != 0)
        return mcp_rpc_refusal(rc, &st);
    json_t *body = decision_json(resp->decision);
    bool ok = allowed(resp->decision) && resp->artifact;
    if (ok) {
        snprintf(s->output_id, sizeof s->output_id, "%s", resp->artifact->id);
        json_object_set_new(body, "artifact", artifact_json(resp->artifact, false));
    }
    charter__v1__record_output_response__free_unpacked(resp, NULL);
    return mcp_result(body, !ok);
}

static json_t *t_deliver(mcp_server *srv, mcp_session *s, const json_t *args)
{
    json_t *r = need_context(srv, s, args);
    if (r)
        return r;
    if (!s->output_id[0])
        return mcp_refusal("deny", "NO_OUTPUT",
                           "this session has recorded no output to deliver: "
                           "call submit_output first");
    /* The same send asked again (after a lost answer, say) keeps its invocation ID, so
     * charterd acknowledges an earlier commit instead of making a second one. */
    const char *recipient = json_string_value(json_object_get(args, "recipient"));
    char key[sizeof s->invocation_of];
    snprintf(key, sizeof key, "%s %s", s->output_id, recipient);
    if (strcmp(key, s->invocation_of) != 0) {
        unsigned char rnd[16];
        if (RAND_bytes(rnd, sizeof rnd) != 1)
            return mcp_refusal("unknown", "INTERNAL", "no randomness for an invocation ID");
        memcpy(s->invocation_id, "mcp-", 4);
        for (size_t i = 0; i < sizeof rnd; i++)
            snprintf(s->invocation_id + 4 + 2 * i, 3, "%02x", rnd[i]);
        snprintf(s->invocation_of, sizeof s->invocation_of, "%s", key);
    }
    Charter__V1__DeliverRequest req = CHARTER__V1__DELIVER_REQUEST__INIT;
    req.context_id = s->context_id;
    req.payload_id = s->output_id;
    req.recipient = (char *)recipient;
    req.tool =
        (char *)json_string_value(json_object_get(json_object_get(srv->step, "deliver"), "tool"));
    req.invocation_id = s->invocation_id;
    Charter__V1__DeliverResponse *resp = NULL;
    charter_status st;
    int rc = charter_deliver(srv->client, &req, &resp, &st);
    if (rc != 0)
        return mcp_rpc_refusal(rc, &st);
    json_t *body = decision_json(resp->decision);
    bool ok = allowed(resp->decision);
    if (body)
        json_object_set_new(body, "acknowledged", json_boolean(resp->acknowledged));
    /* A send held for a human: the model learns it waits, and who decides; no tool of this
     * server can decide it. */
    if (body && resp->pending_approval && *resp->pending_approval && resp->approval)
        json_object_set_new(body, "pending_approval",
                            json_pack("{s:s, s:s, s:f}", "id", resp->pending_approval, "approver",
                                      resp->approval->approver, "deadline",
                                      resp->approval->deadline));
    if (body && resp->delivery)
        json_object_set_new(
            body, "delivery",
            json_pack("{s:s, s:s, s:s, s:s, s:s, s:f, s:o*}", "invocation_id",
                      resp->delivery->invocation_id, "recipient", resp->delivery->recipient, "tool",
                      resp->delivery->tool, "payload_id", resp->delivery->payload_id,
                      "payload_hash", resp->delivery->payload_hash, "committed_at",
                      resp->delivery->committed_at, "grant_chain",
                      strs_json(resp->delivery->grant_chain, resp->delivery->n_grant_chain)));
    charter__v1__deliver_response__free_unpacked(resp, NULL);
    return mcp_result(body, !ok);
}

static json_t *t_handoff(mcp_server *srv, mcp_session *s, const json_t *args)
{
    json_t *r = need_context(srv, s, args);
    if (r)
        return r;
    json_t *fail = NULL;
    Charter__V1__RunView *v = run_view(srv, s->run_id, 1, &fail);
    if (!v)
        return fail;
    const json_t *ids = json_object_get(args, "artifact_ids");
    char *list[MAX_IDS];
    size_t n = 0, i;
    const json_t *id;
    json_array_foreach(ids, i, id)
    {
        /* Only artifacts of this run travel: text in place of an id is refused, not echoed. */
        const Charter__V1__Artifact *a = view_artifact(v, json_string_value(id));
        if (!a) {
            char w[160];
            snprintf(w, sizeof w, "artifact_ids[%zu] names no artifact of this run", i);
            charter__v1__run_view__free_unpacked(v, NULL);
            return mcp_refusal("deny", "ARTIFACT_NOT_IN_RUN", w);
        }
        list[n++] = a->id;
    }
    /* The receiving step's input gate decides, in a context of that step. */
    Charter__V1__OpenStepRequest oreq = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    oreq.run_id = s->run_id;
    oreq.step = (char *)json_string_value(json_object_get(args, "to"));
    Charter__V1__StepContext *c = NULL;
    charter_status st;
    int rc = charter_open_step(srv->client, &oreq, &c, &st);
    if (rc != 0) {
        charter__v1__run_view__free_unpacked(v, NULL);
        return mcp_rpc_refusal(rc, &st);
    }
    Charter__V1__CheckInputRequest req = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
    req.context_id = c->context_id;
    req.artifact_ids = list;
    req.n_artifact_ids = n;
    Charter__V1__CheckInputResponse *resp = NULL;
    rc = charter_check_input(srv->client, &req, &resp, &st);
    charter__v1__run_view__free_unpacked(v, NULL);
    if (rc != 0) {
        charter__v1__step_context__free_unpacked(c, NULL);
        return mcp_rpc_refusal(rc, &st);
    }
    json_t *body = decision_json(resp->decision);
    bool ok = allowed(resp->decision);
    if (body) {
        json_object_set_new(body, "to", json_string(c->step));
        json_object_set_new(body, "event_seq", json_integer((json_int_t)resp->event_seq));
    }
    charter__v1__step_context__free_unpacked(c, NULL);
    charter__v1__check_input_response__free_unpacked(resp, NULL);
    return mcp_result(body, !ok);
}

static json_t *t_get_run(mcp_server *srv, mcp_session *s, const json_t *args)
{
    (void)args;
    json_t *r = need_run(s);
    if (r)
        return r;
    json_t *fail = NULL;
    Charter__V1__RunView *v = run_view(srv, s->run_id, 500, &fail);
    if (!v)
        return fail;
    json_t *events = json_array(), *deliveries = json_array(), *arts = json_array();
    for (size_t i = 0; i < v->n_events; i++)
        json_array_append_new(events, mcp_event_json(v->events[i]));
    for (size_t i = 0; i < v->n_deliveries; i++) {
        const Charter__V1__Delivery *d = v->deliveries[i];
        json_array_append_new(deliveries,
                              json_pack("{s:s, s:s, s:s, s:s, s:s, s:f}", "invocation_id",
                                        d->invocation_id, "recipient", d->recipient, "tool",
                                        d->tool, "payload_id", d->payload_id, "payload_hash",
                                        d->payload_hash, "committed_at", d->committed_at));
    }
    for (size_t i = 0; i < v->n_artifacts; i++)
        json_array_append_new(arts, artifact_json(v->artifacts[i], false));
    r = mcp_result(json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:I}, s:o, s:o, s:o}", "decision",
                             "allow", "run", "id", v->run->id, "status", v->run->status, "mode",
                             v->run->mode, "workflow", v->run->workflow, "seq",
                             (json_int_t)v->run->seq, "events", events, "deliveries", deliveries,
                             "artifacts", arts),
                   false);
    charter__v1__run_view__free_unpacked(v, NULL);
    return r;
}

static json_t *t_trace_artifact(mcp_server *srv, mcp_session *s, const json_t *args)
{
    json_t *r = need_run(s);
    if (r)
        return r;
    json_t *fail = NULL;
    const char *wanted = json_string_value(json_object_get(args, "artifact_id"));
    Charter__V1__RunView *v = run_view_of(srv, s->run_id, 1, VIEW_ONE, wanted, &fail);
    if (!v)
        return fail;
    const Charter__V1__Artifact *a = view_artifact(v, wanted);
    if (!a) {
        charter__v1__run_view__free_unpacked(v, NULL);
        return mcp_refusal("deny", "ARTIFACT_NOT_IN_RUN",
                           "artifact_id names no artifact of this run");
    }
    Charter__V1__TraceArtifactRequest req = CHARTER__V1__TRACE_ARTIFACT_REQUEST__INIT;
    req.artifact_id = a->id;
    Charter__V1__TraceArtifactResponse *resp = NULL;
    charter_status st;
    int rc = charter_trace_artifact(srv->client, &req, &resp, &st);
    charter__v1__run_view__free_unpacked(v, NULL);
    if (rc != 0)
        return mcp_rpc_refusal(rc, &st);
    json_t *arts = json_array();
    for (size_t i = 0; i < resp->n_artifacts; i++)
        json_array_append_new(arts, artifact_json(resp->artifacts[i], false));
    charter__v1__trace_artifact_response__free_unpacked(resp, NULL);
    return mcp_result(json_pack("{s:s, s:o}", "decision", "allow", "ancestry", arts), false);
}

/* Recovery in this session: every artifact of the run not produced by this step goes through
 * this step's input gate on its own; those admitted are shown (they become the provenance of
 * the next output), the others are listed with the codes and witness that excluded them. */
static json_t *t_recover(mcp_server *srv, mcp_session *s, const json_t *args)
{
    json_t *r = need_context(srv, s, args);
    if (r)
        return r;
    json_t *fail = NULL;
    Charter__V1__RunView *v = run_view_of(srv, s->run_id, 1, VIEW_ALL, NULL, &fail);
    if (!v)
        return fail;
    json_t *admitted = json_array(), *excluded = json_array();
    for (size_t i = 0; i < v->n_artifacts; i++) {
        const Charter__V1__Artifact *a = v->artifacts[i];
        if (strcmp(a->step, srv->step_name) == 0)
            continue;
        bool ok;
        json_t *fail2 = NULL;
        json_t *one = admit(srv, s, a, &ok, &fail2);
        if (!one) { /* charterd did not answer: stop and say so */
            json_decref(admitted);
            json_decref(excluded);
            charter__v1__run_view__free_unpacked(v, NULL);
            return fail2;
        }
        json_array_append_new(ok ? admitted : excluded, one);
    }
    charter__v1__run_view__free_unpacked(v, NULL);
    bool any = json_array_size(admitted) > 0;
    return mcp_result(json_pack("{s:s, s:[s*], s:s, s:o, s:o}", "decision",
                                any ? "allow" : "unknown", "codes",
                                any ? NULL : "NO_PERMITTED_INPUTS", "witness",
                                any ? "" : "no artifact of the run passes this step's input gate",
                                "admitted", admitted, "excluded", excluded),
                      !any);
}

/* ---- the catalog ------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *description;
    bool (*offered)(const mcp_server *);
    json_t *(*schema)(const mcp_server *);
    json_t *(*call)(mcp_server *, mcp_session *, const json_t *);
} tool;

static bool always(const mcp_server *srv)
{
    (void)srv;
    return true;
}
static bool first_step(const mcp_server *srv)
{
    return srv->first_step;
}
static bool reads_sources(const mcp_server *srv)
{
    return step_has_tool(srv, "read_source");
}
static bool delivers(const mcp_server *srv)
{
    return json_object_get(srv->step, "deliver") != NULL;
}
static bool hands_off(const mcp_server *srv)
{
    json_t *to = receivers(srv);
    bool any = json_array_size(to) > 0;
    json_decref(to);
    return any;
}
static bool recovers(const mcp_server *srv)
{
    return json_is_true(json_object_get(srv->step, "recovery"));
}

static json_t *s_none(const mcp_server *srv)
{
    (void)srv;
    return object_schema(json_object());
}
static json_t *s_ctx(const mcp_server *srv)
{
    (void)srv;
    return object_schema(ctx_props());
}
static json_t *s_join(const mcp_server *srv)
{
    (void)srv;
    return object_schema(json_pack("{s:o}", "run_id", id_schema("The run to join.")));
}
static json_t *s_read_source(const mcp_server *srv)
{
    (void)srv;
    json_t *p = ctx_props();
    json_object_set_new(p, "resource_id", id_schema("A resource list_sources names."));
    return object_schema(p);
}
static json_t *s_artifact_ctx(const mcp_server *srv)
{
    (void)srv;
    json_t *p = ctx_props();
    json_object_set_new(p, "artifact_id", id_schema("An artifact of this run."));
    return object_schema(p);
}
static json_t *s_artifact(const mcp_server *srv)
{
    (void)srv;
    return object_schema(json_pack("{s:o}", "artifact_id", id_schema("An artifact of this run.")));
}
static json_t *s_submit(const mcp_server *srv)
{
    json_t *p = ctx_props();
    if (srv->public_render) {
        /* Public output: only the workflow's allowed values, the server's template around them. */
        json_t *fields = json_object();
        const char *k;
        json_t *vals;
        json_object_foreach(json_object_get(srv->step, "public_fields"), k, vals)
            json_object_set_new(fields, k, json_pack("{s:s, s:O}", "type", "string", "enum", vals));
        json_t *fs = object_schema(fields);
        json_object_set_new(fs, "description",
                            json_string("The structured answer; the public text is rendered "
                                        "from it by the workflow's template."));
        json_object_set_new(p, "fields", fs);
    } else {
        json_object_set_new(p, "content",
                            json_pack("{s:s, s:i, s:i, s:s}", "type", "string", "minLength", 1,
                                      "maxLength", MAX_CONTENT, "description",
                                      "The step's output text."));
    }
    return object_schema(p);
}
static json_t *s_deliver(const mcp_server *srv)
{
    json_t *p = ctx_props();
    json_object_set_new(p, "recipient",
                        json_pack("{s:s, s:O, s:s}", "type", "string", "enum",
                                  json_object_get(srv->step, "recipients"), "description",
                                  "One of the step's recipients."));
    return object_schema(p);
}
static json_t *s_handoff(const mcp_server *srv)
{
    json_t *p = ctx_props();
    json_object_set_new(p, "to",
                        json_pack("{s:s, s:o, s:s}", "type", "string", "enum", receivers(srv),
                                  "description", "The step that receives the handoff."));
    json_object_set_new(p, "artifact_ids",
                        json_pack("{s:s, s:o, s:i, s:i}", "type", "array", "items",
                                  id_schema("An artifact of this run."), "minItems", 1, "maxItems",
                                  MAX_IDS));
    return object_schema(p);
}

static const tool tools[] = {
    {"start_run", "Start a new run of this workflow (driven by MCP clients, one role each).",
     first_step, s_none, t_start_run},
    {"join_run", "Join an existing run of this workflow by its run_id.", always, s_join,
     t_join_run},
    {"open_step", "Open this process's step in the run; returns the server-owned context.", always,
     s_none, t_open_step},
    {"list_sources",
     "List the resources this step may read and the artifacts of the steps it receives.", always,
     s_ctx, t_list_sources},
    {"read_source", "Read one resource of this step as a source artifact.", reads_sources,
     s_read_source, t_read_source},
    {"read_artifact",
     "Read an artifact of the run: its content only if the input gate admits it into this step.",
     always, s_artifact_ctx, t_read_artifact},
    {"submit_output",
     "Record this step's output; its provenance is exactly the artifacts shown to this session.",
     always, s_submit, t_submit_output},
    {"deliver", "Deliver the recorded output to one of this step's recipients.", delivers,
     s_deliver, t_deliver},
    {"handoff", "Hand artifacts of this run to a step that receives this one (its input gate).",
     hands_off, s_handoff, t_handoff},
    {"get_run", "The run: status, events, deliveries and artifacts (metadata and hashes only).",
     always, s_none, t_get_run},
    {"trace_artifact", "The ancestry of an artifact of the run (metadata and hashes only).", always,
     s_artifact, t_trace_artifact},
    {"recover", "Recovery: admit every artifact of the run that passes this step's input gate.",
     recovers, s_ctx, t_recover},
    {"start_async_run",
     "Start a run of this workflow that charterd executes on its own (scripted or live model), "
     "with optional budgets; returns at once with its run_id.",
     first_step, mcp_async_start_schema, mcp_async_start},
    {"wait_run",
     "Wait (up to timeout_ms) for events of a run this session started after after_seq, or for "
     "its end.",
     first_step, mcp_async_wait_schema, mcp_async_wait},
    {"cancel_run", "Cancel a run this session started; it never delivers afterwards.", first_step,
     mcp_async_cancel_schema, mcp_async_cancel},
    {"run_events", "The events of a run this session started after after_seq (metadata only).",
     first_step, mcp_async_events_schema, mcp_async_events},
    {"run_receipt", "The signed receipt of an ended run this session started.", first_step,
     mcp_async_run_schema, mcp_async_receipt},
};

json_t *mcp_tools_list(const mcp_server *srv)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < sizeof tools / sizeof *tools; i++)
        if (tools[i].offered(srv))
            json_array_append_new(list, json_pack("{s:s, s:s, s:o}", "name", tools[i].name,
                                                  "description", tools[i].description,
                                                  "inputSchema", tools[i].schema(srv)));
    json_t *live = mcp_live_list(srv);
    if (list && live)
        json_array_extend(list, live);
    json_decref(live);
    return list;
}

int mcp_tools_call(mcp_server *srv, mcp_session *s, const char *name, const json_t *args,
                   json_t **result)
{
    *result = NULL;
    const tool *t = NULL;
    for (size_t i = 0; i < sizeof tools / sizeof *tools; i++)
        if (strcmp(tools[i].name, name) == 0)
            t = &tools[i];
    json_t *empty = NULL;
    if (!args)
        args = empty = json_object();
    if (!t) {
        int live = mcp_live_call(srv, s, name, args, result);
        json_decref(empty);
        return live ? (*result ? 0 : -1) : MCP_INVALID_PARAMS;
    }
    /* Checked again on execution: a tool not offered to this role is refused. */
    if (!t->offered(srv)) {
        char w[256];
        snprintf(w, sizeof w, "tool %s is not a tool of step %s", t->name, srv->step_name);
        *result = mcp_refusal("deny", "TOOL_NOT_PERMITTED", w);
    } else {
        json_t *schema = t->schema(srv);
        char err[320];
        if (!schema)
            *result = NULL;
        else if (check(schema, args, "arguments", err, sizeof err) != 0)
            *result = mcp_refusal("deny", "ARGUMENT_INVALID", err);
        else
            *result = t->call(srv, s, args);
        json_decref(schema);
    }
    json_decref(empty);
    return *result ? 0 : -1;
}
