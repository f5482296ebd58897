/*
 * cli_workflow_offline.c - `charter workflow validate FILE` and `charter workflow test FILE`
 * with no charterd (see cli_workflow_offline.h).
 *
 * validate is charterd's own validator (policy/workflow.c) collecting every problem. test loads
 * the workflow a test file names with charterd's loader, states each case's facts in the shapes
 * the query library answers with (one charter_ancestry reply per artifact, the
 * charter_grant_chain reply of the step's grant, the acting context), decodes them with the
 * facts codec the store uses and decides them with the evaluator functions the gates call
 * (policy/evaluator.c). A verdict here is therefore the one charterd gives for those facts:
 * what a test cannot state is what only a live graph holds (a lineage summary's seal, the
 * database clock, an invocation ID already used).
 */
#include "cli_workflow_offline.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_json.h"
#include "cli_workflow.h"
#include "core/digest.h"
#include "policy/evaluator.h"
#include "policy/facts.h"
#include "policy/guard.h"
#include "policy/tokens.h"
#include "policy/workflow.h"

enum { OFF_OK = 0, OFF_FAIL = 1, OFF_USAGE = 2 };

/* The run and the contexts every case's facts belong to: a test states one run's lineage. */
#define OFF_RUN "test-run"
#define OFF_CONTEXT "test-context"
#define OFF_PRODUCER "test-producer"
/* The code an allowed send carries while it waits for its human (Deliver's answer). */
#define OFF_APPROVAL_PENDING "APPROVAL_PENDING"

/* ---- validate ---------------------------------------------------------------------------- */

typedef struct {
    const char *path;
    json_t *problems; /* --json: the lines; otherwise NULL and each line is printed */
} off_validate;

static void validate_problem(void *arg, const char *line)
{
    off_validate *v = arg;
    if (v->problems != NULL)
        json_array_append_new(v->problems, json_string(line));
    else
        fprintf(stderr, "%s: %s\n", v->path, line);
}

/* "4 resources, 2 recipients, ..." of a valid definition into buf. */
static void validate_counts(const workflow *wf, char *buf, size_t n)
{
    static const char *const parts[] = {"resources", "recipients", "actors", "grants"};
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < 4 && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%zu %s, ",
                                 json_array_size(json_object_get(wf->doc, parts[i])), parts[i]);
    if (used < n)
        used += (size_t)snprintf(buf + used, n - used, "%zu step%s", wf->n_steps,
                                 wf->n_steps == 1 ? "" : "s");
    size_t expect = json_array_size(json_object_get(wf->doc, "expect"));
    if (expect > 0 && used < n)
        snprintf(buf + used, n - used, ", %zu expectations", expect);
}

static int validate_report(const off_validate *v, size_t problems, const char *unchecked,
                           const workflow *wf, bool json)
{
    char counts[256] = "";
    if (wf != NULL)
        validate_counts(wf, counts, sizeof counts);
    if (json) {
        json_t *out = json_pack("{s:s, s:b, s:O}", "file", v->path, "valid", problems == 0,
                                "problems", v->problems);
        if (out != NULL && unchecked[0] != '\0')
            json_object_set_new(out, "unchecked", json_string(unchecked));
        if (out != NULL && wf != NULL)
            json_object_update_new(out, json_pack("{s:s, s:s, s:s}", "workflow", wf->name,
                                                  "version", wf->version, "summary", counts));
        int rv = cli_json_print(out);
        json_decref(out);
        if (rv != 0)
            return OFF_FAIL;
    } else if (problems == 0) {
        printf("%s: valid: workflow %s (%s), version %s\n", v->path, wf->name, counts, wf->version);
    } else {
        fprintf(stderr, "%s: %zu problem%s", v->path, problems, problems == 1 ? "" : "s");
        if (unchecked[0] != '\0')
            fprintf(stderr, "; not checked until those are fixed: %s", unchecked);
        fputc('\n', stderr);
    }
    return problems == 0 ? OFF_OK : OFF_FAIL;
}

int cli_workflow_validate(const char *path, bool json)
{
    char *bytes = NULL;
    size_t len = 0;
    int rv = cli_workflow_read(path, &bytes, &len);
    if (rv != 0)
        return OFF_USAGE;
    off_validate v = {path, json ? json_array() : NULL};
    char unchecked[128];
    size_t problems =
        workflow_check_buffer(bytes, len, validate_problem, &v, unchecked, sizeof unchecked);
    workflow *wf = NULL;
    char err[1024];
    if (problems == 0 && workflow_load_buffer(bytes, len, &wf, err, sizeof err) != 0) {
        fprintf(stderr, "charter: %s: %s\n", path, err); /* out of memory only */
        rv = OFF_FAIL;
    } else {
        rv = validate_report(&v, problems, unchecked, wf, json);
    }
    workflow_free(wf);
    json_decref(v.problems);
    free(bytes);
    return rv;
}

/* ---- the test file ----------------------------------------------------------------------- */

/* One artifact a test file states: a source read from a resource of the workflow, or a model
 * output derived from earlier artifacts. Strings are borrowed from the test file or the
 * workflow; labels are computed as charterd computes them when it creates the artifact. */
typedef struct {
    const char *id;
    const char *title;
    const char *resource;  /* a source's resource, NULL for a derived artifact */
    const json_t *parents; /* a derived artifact's derived_from */
    int conf, integrity;
    const char *content; /* what a value quoted from it must occur in */
    char hash[65];       /* hex SHA-256 of its content */
} off_artifact;

typedef struct {
    const char *path;
    json_t *doc;
    workflow *wf;
    json_t *seed; /* workflow_seed_json(wf): the graph nodes the definition seeds */
    off_artifact *arts;
    size_t n_arts;
    long long now; /* the default time of a case, seconds since the epoch */
    bool json;
    json_t *results; /* --json: one object per case */
    unsigned passed, failed;
} off_suite;

static int off_fail(const off_suite *s, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A test file that breaks a rule of the format: one line naming the field path. */
static int off_fail(const off_suite *s, const char *field, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "charter: %s: %s: ", s->path, field);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return OFF_USAGE;
}

typedef struct {
    const char *key;
    json_type type;
    bool required;
} off_field;

/* v is an object of exactly the spec's fields, each of its type, the required ones present. */
static int off_object(const off_suite *s, const json_t *v, const char *path, const off_field *spec,
                      size_t n)
{
    static const char *const type_names[] = {
        [JSON_OBJECT] = "an object",    [JSON_ARRAY] = "a list",  [JSON_STRING] = "a string",
        [JSON_INTEGER] = "an integer",  [JSON_REAL] = "a number", [JSON_TRUE] = "true or false",
        [JSON_FALSE] = "true or false", [JSON_NULL] = "null"};
    if (!json_is_object(v))
        return off_fail(s, path, "must be an object");
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        bool known = false;
        for (size_t i = 0; i < n && !known; i++)
            known = strcmp(spec[i].key, key) == 0;
        if (!known)
            return off_fail(s, path, "unknown field \"%.64s\"", key);
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *f = json_object_get(v, spec[i].key);
        if (f == NULL && spec[i].required)
            return off_fail(s, path, "%s: required field is missing", spec[i].key);
        if (f != NULL && json_typeof(f) != spec[i].type)
            return off_fail(s, path, "%s: must be %s", spec[i].key, type_names[spec[i].type]);
    }
    return OFF_OK;
}

/* The entry of the seed's list part ("resources", "recipients", "actors", "grants") whose id
 * is id, or NULL. */
static const json_t *seed_find(const off_suite *s, const char *part, const char *id)
{
    const json_t *list = json_object_get(s->seed, part);
    for (size_t i = 0; id != NULL && i < json_array_size(list); i++) {
        const char *eid = json_string_value(json_object_get(json_array_get(list, i), "id"));
        if (eid != NULL && strcmp(eid, id) == 0)
            return json_array_get(list, i);
    }
    return NULL;
}

/* The artifact of the test file named id, or NULL. */
static const off_artifact *art_find(const off_suite *s, const char *id)
{
    for (size_t i = 0; id != NULL && i < s->n_arts; i++)
        if (strcmp(s->arts[i].id, id) == 0)
            return &s->arts[i];
    return NULL;
}

/* A time field ("now"): *out when present and valid, unchanged when absent. */
static int off_time(const off_suite *s, const json_t *v, const char *path, long long *out)
{
    if (v == NULL)
        return OFF_OK;
    if (workflow_time_parse(json_string_value(v), out) != 0)
        return off_fail(s, path,
                        "\"%.64s\" is not an RFC 3339 UTC time like "
                        "\"2026-01-01T00:00:00Z\"",
                        json_string_value(v));
    return OFF_OK;
}

/* Every entry of list (at path) is a string naming an entry of the seed's part (noun for the
 * message), or, with part NULL, an artifact of the test file. */
static int off_refs(const off_suite *s, const json_t *list, const char *path, const char *part,
                    const char *noun)
{
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *id = json_string_value(json_array_get(list, i));
        char p[256];
        snprintf(p, sizeof p, "%s[%zu]", path, i);
        if (id == NULL)
            return off_fail(s, p, "must be a string");
        if (part != NULL ? seed_find(s, part, id) == NULL : art_find(s, id) == NULL)
            return off_fail(s, p, "\"%.64s\" is not %s", id, noun);
        for (size_t j = 0; j < i; j++)
            if (strcmp(json_string_value(json_array_get(list, j)), id) == 0)
                return off_fail(s, p, "\"%.64s\" is listed twice", id);
    }
    return OFF_OK;
}

/* ---- artifacts ----------------------------------------------------------------------------- */

static const off_field artifact_spec[] = {
    {"id", JSON_STRING, true},           {"source", JSON_STRING, false},
    {"derived_from", JSON_ARRAY, false}, {"title", JSON_STRING, false},
    {"content", JSON_STRING, false},
};

/* A source's labels and content are its resource's; a derived artifact's labels are the
 * maximum confidentiality and the minimum integrity of its parents (charter_create_artifact). */
static int art_labels(off_suite *s, off_artifact *a, const json_t *x, const char *p)
{
    const char *content = json_string_value(json_object_get(x, "content"));
    if (a->resource != NULL) {
        const json_t *r = seed_find(s, "resources", a->resource);
        if (r == NULL)
            return off_fail(s, p, "source: \"%.64s\" is not a resource of the workflow",
                            a->resource);
        /* An observed resource has no content of its own: a host observed what it read. */
        bool observed =
            workflow_observed(s->wf, a->resource, &(long long){0}, &(const char *){NULL}) == 1;
        if (json_object_get(x, "title") != NULL || (content != NULL && !observed))
            return off_fail(s, p,
                            "a source takes its title and content from its resource "
                            "(leave title and content out; content only for an observed one)");
        a->title = json_string_value(json_object_get(r, "title"));
        a->conf = (int)json_integer_value(json_object_get(r, "conf"));
        a->integrity = (int)json_integer_value(json_object_get(r, "integrity"));
        if (content == NULL)
            content = json_string_value(json_object_get(r, "content"));
    } else {
        a->conf = GUARD_CONF_PUBLIC;
        a->integrity = GUARD_INTEGRITY_TRUSTED;
        for (size_t k = 0; k < json_array_size(a->parents); k++) {
            const off_artifact *up = art_find(s, json_string_value(json_array_get(a->parents, k)));
            a->conf = up->conf > a->conf ? up->conf : a->conf;
            a->integrity = up->integrity < a->integrity ? up->integrity : a->integrity;
        }
        if (content == NULL)
            content = a->title;
    }
    a->content = content;
    return digest_sha256_hex(content, strlen(content), a->hash) == 0
               ? OFF_OK
               : off_fail(s, p, "cannot hash the content (check the OpenSSL installation)");
}

/* artifacts[i]: its fields, a fresh id, and a derived_from naming earlier artifacts only, so a
 * lineage is history (no cycle) as it is in a graph. */
static int art_load(off_suite *s, size_t i)
{
    const json_t *x = json_array_get(json_object_get(s->doc, "artifacts"), i);
    char p[64], f[128];
    snprintf(p, sizeof p, "artifacts[%zu]", i);
    int rv = off_object(s, x, p, artifact_spec, sizeof artifact_spec / sizeof artifact_spec[0]);
    if (rv != OFF_OK)
        return rv;
    off_artifact *a = &s->arts[i];
    a->id = json_string_value(json_object_get(x, "id"));
    a->resource = json_string_value(json_object_get(x, "source"));
    a->parents = json_object_get(x, "derived_from");
    a->title = json_string_value(json_object_get(x, "title"));
    if (a->id[0] == '\0' || strlen(a->id) > WORKFLOW_ID_MAX)
        return off_fail(s, p, "id: 1 to 64 characters");
    s->n_arts = i; /* art_find sees the earlier artifacts only */
    if (art_find(s, a->id) != NULL)
        return off_fail(s, p, "id: \"%s\" is already an artifact of the test file", a->id);
    if ((a->resource == NULL) == (a->parents == NULL))
        return off_fail(s, p,
                        "needs exactly one of source (a resource it was read from) and "
                        "derived_from (the earlier artifacts it was made from)");
    snprintf(f, sizeof f, "%s.derived_from", p);
    if (a->parents != NULL && json_array_size(a->parents) == 0)
        return off_fail(s, f, "must name at least one earlier artifact");
    if (a->parents != NULL &&
        (rv = off_refs(s, a->parents, f, NULL, "an earlier artifact of the test file")) != OFF_OK)
        return rv;
    if (a->title == NULL)
        a->title = a->id;
    s->n_arts = i + 1;
    return art_labels(s, a, x, p);
}

/* The artifact as one entry of a charter_ancestry reply: the fields and edges charterd stores
 * when the host records it with exactly its parents as the model request's inputs. */
static json_t *art_json(const off_suite *s, const off_artifact *a)
{
    bool source = a->resource != NULL;
    json_t *resources = json_array();
    const json_t *r = source ? seed_find(s, "resources", a->resource) : NULL;
    if (r != NULL)
        json_array_append_new(resources, json_pack("{s:s, s:O, s:O, s:O}", "id", a->resource,
                                                   "title", json_object_get(r, "title"), "conf",
                                                   json_object_get(r, "conf"), "integrity",
                                                   json_object_get(r, "integrity")));
    json_t *parents = source ? json_array() : json_deep_copy(a->parents);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:b, s:O, s:o, s:o, s:[s]}", "id", a->id,
                     "run_id", OFF_RUN, "title", a->title, "hash", a->hash, "kind",
                     source ? "source" : "derived", "conf", a->conf, "integrity", a->integrity,
                     "capture_complete", !source, "input_ids", parents, "parents", parents,
                     "resources", resources, "producers", OFF_PRODUCER);
}

/* The charter_ancestry reply of artifact a: it and every artifact it derives from. */
static json_t *ancestry_json(const off_suite *s, const off_artifact *a)
{
    json_t *items = json_array();
    bool *seen = calloc(s->n_arts + 1, sizeof *seen);
    const off_artifact **queue = calloc(s->n_arts + 1, sizeof *queue);
    size_t head = 0, tail = 0;
    if (items == NULL || seen == NULL || queue == NULL)
        goto out;
    queue[tail++] = a;
    seen[a - s->arts] = true;
    while (head < tail) {
        const off_artifact *at = queue[head++];
        json_array_append_new(items, art_json(s, at));
        for (size_t k = 0; k < json_array_size(at->parents); k++) {
            const off_artifact *up = art_find(s, json_string_value(json_array_get(at->parents, k)));
            if (up != NULL && !seen[up - s->arts]) {
                seen[up - s->arts] = true;
                queue[tail++] = up;
            }
        }
    }
out:
    free(seen);
    free(queue);
    return json_pack("{s:s, s:b, s:o}", "root", a->id, "truncated", 0, "artifacts", items);
}

/* Adds to out (ids, sorted, once each) every resource a's ancestry reaches. */
static void sources_reached(const off_suite *s, const off_artifact *a, json_t *out)
{
    if (a->resource != NULL) {
        size_t at = 0;
        for (; at < json_array_size(out); at++) {
            int c = strcmp(json_string_value(json_array_get(out, at)), a->resource);
            if (c == 0)
                return;
            if (c > 0)
                break;
        }
        json_array_insert_new(out, at, json_string(a->resource));
        return;
    }
    for (size_t k = 0; k < json_array_size(a->parents); k++)
        sources_reached(s, art_find(s, json_string_value(json_array_get(a->parents, k))), out);
}

/* The sources a's ancestry reaches with their labels, as a summary records them (labels) and
 * as charter_invoke_facts reads them now (titled, for a witness). 0 or -1. */
static int summary_sources(const off_suite *s, const off_artifact *a, json_t **labels, json_t **now)
{
    json_t *ids = json_array();
    *labels = json_array();
    *now = json_array();
    if (ids == NULL || *labels == NULL || *now == NULL) {
        json_decref(ids);
        return -1;
    }
    sources_reached(s, a, ids);
    for (size_t i = 0; i < json_array_size(ids); i++) {
        const json_t *r = seed_find(s, "resources", json_string_value(json_array_get(ids, i)));
        json_array_append_new(*labels, json_pack("{s:O, s:O, s:O}", "id", json_object_get(r, "id"),
                                                 "conf", json_object_get(r, "conf"), "integrity",
                                                 json_object_get(r, "integrity")));
        json_array_append_new(
            *now, json_pack("{s:O, s:O, s:O, s:O}", "id", json_object_get(r, "id"), "title",
                            json_object_get(r, "title"), "conf", json_object_get(r, "conf"),
                            "integrity", json_object_get(r, "integrity")));
    }
    json_decref(ids);
    return 0;
}

/* The lineage summary of a as charter_invoke_facts answers it: the summary charterd writes when
 * it creates a (every structural rule holding), its SHA-1, a's fields and edges now and the
 * sources it reaches. New reference, NULL when memory ran out. */
static json_t *summary_json(const off_suite *s, const off_artifact *a)
{
    json_t *labels = NULL, *now = NULL;
    bool source = a->resource != NULL;
    if (summary_sources(s, a, &labels, &now) != 0) {
        json_decref(labels);
        json_decref(now);
        return NULL;
    }
    json_t *parents = source ? json_array() : json_deep_copy(a->parents);
    json_t *resources = source ? json_pack("[s]", a->resource) : json_array();
    json_t *sum = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:b, s:s, s:s, s:O, s:o}",
                            "v", 1, "id", a->id, "run_id", OFF_RUN, "kind",
                            source ? "source" : "derived", "resource", source ? a->resource : "",
                            "hash", a->hash, "conf", a->conf, "integrity", a->integrity, "ok", 1,
                            "code", "", "why", "", "parents", parents, "sources", labels);
    char *text = sum != NULL ? json_dumps(sum, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    char sha[41] = "";
    json_decref(sum);
    json_t *j = NULL;
    if (text != NULL && digest_sha1_hex(text, strlen(text), sha) == 0)
        j = json_pack("{s:s, s:s, s:s, s:O, s:O, s:[s], s:O, s:{s:s, s:s, s:s, s:s, s:i, s:i}}",
                      "id", a->id, "summary_hash", sha, "summary", text, "parents", parents,
                      "resources", resources, "producers", OFF_PRODUCER, "sources", now, "artifact",
                      "run_id", OFF_RUN, "kind", source ? "source" : "derived", "hash", a->hash,
                      "title", a->title, "conf", a->conf, "integrity", a->integrity);
    free(text);
    json_decref(parents);
    json_decref(resources);
    json_decref(now);
    return j;
}

/* ---- the grant chain and the context ----------------------------------------------------- */

/* An actor of the workflow as a GRANTED_TO / ISSUED_BY edge: {id, kind}. */
static json_t *actor_json(const off_suite *s, const char *id)
{
    const json_t *a = seed_find(s, "actors", id);
    return json_pack("{s:s, s:O}", "id", id, "kind", json_object_get(a, "kind"));
}

static bool list_holds(const json_t *list, const char *id)
{
    for (size_t i = 0; i < json_array_size(list); i++)
        if (strcmp(json_string_value(json_array_get(list, i)), id) == 0)
            return true;
    return false;
}

/* The charter_grant_chain reply of leaf: it and every grant above it as the workflow seeded
 * them, the ones in revoked revoked at now. */
static json_t *chain_json(const off_suite *s, const char *leaf, const json_t *revoked,
                          long long now)
{
    json_t *grants = json_array();
    const char *id = leaf;
    for (size_t n = 0; id != NULL && n < WORKFLOW_MAX_GRANTS; n++) {
        const json_t *g = seed_find(s, "grants", id);
        if (g == NULL)
            break;
        const char *parent = json_string_value(json_object_get(g, "delegated_from"));
        const char *issuer = json_string_value(json_object_get(g, "issuer"));
        json_t *issuers = json_array();
        if (issuer != NULL)
            json_array_append_new(issuers, actor_json(s, issuer));
        json_array_append_new(
            grants,
            json_pack("{s:s, s:O, s:O, s:O, s:O, s:O, s:O, s:I, s:o, s:[o], s:o}", "id", id, "root",
                      json_object_get(g, "root"), "tools", json_object_get(g, "tools"),
                      "recipients", json_object_get(g, "recipients"), "resources",
                      json_object_get(g, "resources"), "valid_from",
                      json_object_get(g, "valid_from"), "valid_to", json_object_get(g, "valid_to"),
                      "revoked_at", (json_int_t)(list_holds(revoked, id) ? now : 0), "parents",
                      parent != NULL ? json_pack("[s]", parent) : json_array(), "grantees",
                      actor_json(s, json_string_value(json_object_get(g, "grantee"))), "issuers",
                      issuers));
        id = parent;
    }
    return json_pack("{s:s, s:o}", "leaf", leaf, "grants", grants);
}

/* The context a case acts in: of the test run, of the step, owned by the step's actor. */
static int context_of(const workflow_step *st, guard_context *ctx)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:[s]}", "id", OFF_CONTEXT, "run_id", OFF_RUN, "step",
                          st->cap.step, "owners", st->cap.actor);
    int rc = j != NULL ? facts_context_from_json(j, ctx) : -1;
    json_decref(j);
    return rc == STATUS_OK ? 0 : -1;
}

/* ---- cases ------------------------------------------------------------------------------- */

/* What a case asks and what was decided, for the report. */
typedef struct {
    char what[512];       /* "deliver recommendation to public (step report, tool ...)" */
    guard_decision d;     /* the evaluator's verdict */
    const char *approver; /* an allowed send held for this human, or NULL */
    long long within_ms;  /* and the time the human has */
} off_verdict;

static const off_field case_spec[] = {
    {"name", JSON_STRING, false},   {"now", JSON_STRING, false},     {"revoked", JSON_ARRAY, false},
    {"input", JSON_OBJECT, false},  {"deliver", JSON_OBJECT, false}, {"read", JSON_OBJECT, false},
    {"invoke", JSON_OBJECT, false}, {"expect", JSON_OBJECT, true},
};
static const off_field input_spec[] = {{"step", JSON_STRING, true},
                                       {"artifacts", JSON_ARRAY, true}};
static const off_field deliver_spec[] = {{"step", JSON_STRING, true},
                                         {"payload", JSON_STRING, true},
                                         {"recipient", JSON_STRING, true},
                                         {"tool", JSON_STRING, false}};
static const off_field read_spec[] = {{"step", JSON_STRING, true}, {"resource", JSON_STRING, true}};
static const off_field invoke_spec[] = {
    {"step", JSON_STRING, true}, {"tool", JSON_STRING, true}, {"arguments", JSON_ARRAY, true}};
static const off_field argument_spec[] = {
    {"name", JSON_STRING, true},     {"value", JSON_STRING, true},
    {"from_task", JSON_TRUE, false}, {"quoted_from", JSON_STRING, false},
    {"lineage", JSON_ARRAY, false},
};
static const off_field expect_spec[] = {
    {"outcome", JSON_STRING, true}, {"codes", JSON_ARRAY, false}, {"witness", JSON_STRING, false}};

/* The step a gate request of a case names (at path p), or NULL after saying why. */
static const workflow_step *case_step(const off_suite *s, const json_t *req, const char *p)
{
    const char *name = json_string_value(json_object_get(req, "step"));
    const workflow_step *st = workflow_step_find(s->wf, name);
    if (st == NULL)
        off_fail(s, p, "step: \"%.64s\" is not a step of workflow %s", name, s->wf->name);
    return st;
}

/* The input gate over the artifacts of an input request, as CheckInput decides it. */
static int decide_input(const off_suite *s, const json_t *req, const char *p, off_verdict *v)
{
    const json_t *ids = json_object_get(req, "artifacts");
    const workflow_step *st = case_step(s, req, p);
    char f[192];
    snprintf(f, sizeof f, "%s.artifacts", p);
    if (st == NULL)
        return OFF_USAGE;
    if (json_array_size(ids) == 0)
        return off_fail(s, f, "must name at least one artifact");
    int rv = off_refs(s, ids, f, NULL, "an artifact of the test file");
    if (rv != OFF_OK)
        return rv;
    json_t *ancestries = json_array();
    size_t used = (size_t)snprintf(v->what, sizeof v->what, "input");
    for (size_t i = 0; i < json_array_size(ids); i++) {
        const off_artifact *a = art_find(s, json_string_value(json_array_get(ids, i)));
        json_array_append_new(ancestries, ancestry_json(s, a));
        if (used < sizeof v->what)
            used += (size_t)snprintf(v->what + used, sizeof v->what - used, "%s%s",
                                     i == 0 ? " " : ", ", a->id);
    }
    if (used < sizeof v->what)
        snprintf(v->what + used, sizeof v->what - used, " to step %s", st->cap.step);
    guard_context ctx;
    int conf = 0, integrity = 0;
    rv = context_of(st, &ctx) == 0 && evaluator_input_decide(&st->cap, &ctx, ancestries, NULL,
                                                             &v->d, &conf, &integrity) == 0
             ? OFF_OK
             : off_fail(s, p, "out of memory");
    facts_context_free(&ctx);
    json_decref(ancestries);
    return rv;
}

/* The source gate over a read request, as ReadSource decides it. */
static int decide_read(const off_suite *s, const json_t *req, const char *p, off_verdict *v)
{
    const workflow_step *st = case_step(s, req, p);
    const char *resource = json_string_value(json_object_get(req, "resource"));
    if (st == NULL)
        return OFF_USAGE;
    if (seed_find(s, "resources", resource) == NULL)
        return off_fail(s, p, "resource: \"%.64s\" is not a resource of workflow %s", resource,
                        s->wf->name);
    snprintf(v->what, sizeof v->what, "read %s in step %s", resource, st->cap.step);
    return evaluator_source_decide(&st->cap, resource, &v->d) == 0
               ? OFF_OK
               : off_fail(s, p, "out of memory");
}

/* The tool of a deliver request: the one it names, else the step's own send. */
static const char *deliver_tool(const off_suite *s, const json_t *req, const workflow_step *st,
                                const char *p)
{
    const char *tool = json_string_value(json_object_get(req, "tool"));
    if (tool == NULL && st->deliver_tool == NULL)
        off_fail(s, p, "step %s sends nothing by itself (no deliver): name the tool", st->cap.step);
    return tool != NULL ? tool : st->deliver_tool;
}

/* The delivery gate over a deliver request, as Deliver decides it, then the human approval
 * the workflow asks for an allowed send. */
static int decide_deliver(const off_suite *s, const json_t *req, const char *p, long long now,
                          const json_t *revoked, off_verdict *v)
{
    const workflow_step *st = case_step(s, req, p);
    const off_artifact *payload = art_find(s, json_string_value(json_object_get(req, "payload")));
    const char *rcp = json_string_value(json_object_get(req, "recipient"));
    const json_t *r = seed_find(s, "recipients", rcp);
    const char *tool = st != NULL ? deliver_tool(s, req, st, p) : NULL;
    if (st == NULL || tool == NULL)
        return OFF_USAGE;
    if (payload == NULL)
        return off_fail(s, p, "payload: \"%.64s\" is not an artifact of the test file",
                        json_string_value(json_object_get(req, "payload")));
    if (r == NULL)
        return off_fail(s, p, "recipient: \"%.64s\" is not a recipient of workflow %s", rcp,
                        s->wf->name);
    snprintf(v->what, sizeof v->what, "deliver %s to %s (step %s, tool %s)", payload->id, rcp,
             st->cap.step, tool);
    guard_delivery_request dr = {(char *)OFF_RUN,
                                 (char *)payload->id,
                                 (char *)rcp,
                                 (int)json_integer_value(json_object_get(r, "clearance")),
                                 (char *)tool,
                                 st->cap.grant,
                                 NULL,
                                 workflow_live_tool(s->wf, tool) != NULL};
    json_t *anc_j = ancestry_json(s, payload),
           *chain_j = chain_json(s, st->cap.grant, revoked, now);
    guard_ancestry anc = {0};
    guard_chain chain = {0};
    guard_context ctx = {0};
    int rv = facts_ancestry_from_json(anc_j, payload->id, &anc) == STATUS_OK &&
                     facts_chain_from_json(chain_j, st->cap.grant, &chain) == STATUS_OK &&
                     context_of(st, &ctx) == 0 &&
                     evaluator_delivery_decide(&st->cap, &ctx, &dr, &anc, &chain, (double)now,
                                               payload->hash, payload->hash, &v->d) == 0
                 ? OFF_OK
                 : off_fail(s, p, "the facts could not be built (out of memory)");
    if (rv == OFF_OK && v->d.outcome == GUARD_ALLOW)
        workflow_approval_for(s->wf, tool, rcp, &v->approver, &v->within_ms);
    /* The allowed decision borrows the chain and the sources from the facts freed here. */
    free(v->d.chain_order.items);
    free(v->d.sources.items);
    memset(&v->d.chain_order, 0, sizeof v->d.chain_order);
    memset(&v->d.sources, 0, sizeof v->d.sources);
    facts_context_free(&ctx);
    facts_chain_free(&chain);
    facts_ancestry_free(&anc);
    json_decref(chain_j);
    json_decref(anc_j);
    return rv;
}

/* True when one artifact of the test file that lineage names holds value as a token. */
static bool lineage_holds(const off_suite *s, const json_t *lineage, const char *value)
{
    for (size_t k = 0; k < json_array_size(lineage); k++) {
        const off_artifact *a = art_find(s, json_string_value(json_array_get(lineage, k)));
        if (a != NULL && token_holds(a->content, value))
            return true;
    }
    return false;
}

/* One argument of an invoke request (at path p), checked as Gate/Invoke checks it before
 * deciding: declared by the tool, and its value where it says it came from (the run's task,
 * the content of the artifact it is quoted from). Appends it as the guard reads it to args and
 * the artifacts it names to ids. */
static int invoke_argument(const off_suite *s, const json_t *decl, const json_t *x, const char *p,
                           json_t *args, json_t *ids)
{
    int rv = off_object(s, x, p, argument_spec, sizeof argument_spec / sizeof argument_spec[0]);
    if (rv != OFF_OK)
        return rv;
    const char *name = json_string_value(json_object_get(x, "name"));
    const char *value = json_string_value(json_object_get(x, "value"));
    const char *quoted = json_string_value(json_object_get(x, "quoted_from"));
    const json_t *lineage = json_object_get(x, "lineage");
    bool from_task = json_object_get(x, "from_task") != NULL;
    const char *role = workflow_argument_role(decl, name);
    if (decl != NULL && role == NULL)
        return off_fail(s, p, "name: tool declares no argument \"%.64s\"", name);
    if (from_task + (quoted != NULL) + (lineage != NULL) != 1)
        return off_fail(s, p, "needs exactly one of from_task, quoted_from and lineage");
    if (from_task && !token_holds(s->wf->task, value))
        return off_fail(s, p, "value: not in the workflow's task");
    const off_artifact *q = quoted != NULL ? art_find(s, quoted) : NULL;
    if (quoted != NULL && (q == NULL || !token_holds(q->content, value)))
        return off_fail(s, p,
                        "quoted_from: \"%.64s\" is no artifact of the test file holding "
                        "the value",
                        quoted);
    char f[256];
    snprintf(f, sizeof f, "%.200s.lineage", p);
    if (lineage != NULL &&
        (json_array_size(lineage) == 0 ||
         (rv = off_refs(s, lineage, f, NULL, "an artifact of the test file")) != OFF_OK))
        return rv != OFF_OK ? rv : off_fail(s, f, "must name at least one artifact");
    if (lineage != NULL && !lineage_holds(s, lineage, value))
        return off_fail(s, f, "no artifact it names holds the value (a lineage holds its value)");
    json_t *named = lineage != NULL ? json_deep_copy(lineage) : json_array();
    if (quoted != NULL)
        json_array_append_new(named, json_string(quoted));
    for (size_t k = 0; k < json_array_size(named); k++)
        if (!list_holds(ids, json_string_value(json_array_get(named, k))))
            json_array_append(ids, json_array_get(named, k));
    json_array_append_new(args,
                          json_pack("{s:s, s:s, s:s, s:b, s:s, s:o}", "name", name, "value", value,
                                    "role", role != NULL ? role : "data", "from_task", from_task,
                                    "quoted_from", quoted ? quoted : "", "lineage", named));
    return OFF_OK;
}

/* The request of an invoke case as Gate/Invoke builds it for the guard (invoke.c): the tool's
 * declaration, each argument, the destination class its destination argument's value matches.
 * *request and *summaries (the summaries of every artifact a value names) are new references. */
static int invoke_request(const off_suite *s, const workflow_step *st, const json_t *req,
                          const char *p, json_t **request, json_t **summaries)
{
    const char *tool = json_string_value(json_object_get(req, "tool"));
    const json_t *decl = workflow_live_tool(s->wf, tool);
    const json_t *given = json_object_get(req, "arguments");
    const char *dest_arg = json_string_value(json_object_get(decl, "destination"));
    const char *value = NULL;
    json_t *args = json_array(), *ids = json_array();
    int rv = OFF_OK;
    for (size_t i = 0; rv == OFF_OK && i < json_array_size(given); i++) {
        const json_t *x = json_array_get(given, i);
        char f[256];
        snprintf(f, sizeof f, "%.200s.arguments[%zu]", p, i);
        rv = invoke_argument(s, decl, x, f, args, ids);
        const char *name = json_string_value(json_object_get(x, "name"));
        if (rv == OFF_OK && dest_arg != NULL && strcmp(name, dest_arg) == 0)
            value = json_string_value(json_object_get(x, "value"));
    }
    int clearance = -1;
    const char *dest = value != NULL ? workflow_match_destination(s->wf, value, &clearance) : NULL;
    *summaries = json_array();
    for (size_t i = 0; rv == OFF_OK && i < json_array_size(ids); i++)
        json_array_append_new(
            *summaries, summary_json(s, art_find(s, json_string_value(json_array_get(ids, i)))));
    *request = rv == OFF_OK ? json_pack("{s:s, s:s, s:b, s:s, s:s?, s:s?, s:s?, s:i, s:O}",
                                        "run_id", OFF_RUN, "tool", tool, "declared", decl != NULL,
                                        "grant", st->cap.grant, "destination_arg", dest_arg,
                                        "destination_value", value, "destination", dest,
                                        "clearance", clearance, "arguments", args)
                            : NULL;
    json_decref(args);
    json_decref(ids);
    if (rv == OFF_OK && (*request == NULL || *summaries == NULL))
        rv = off_fail(s, p, "out of memory");
    return rv;
}

/* The tool-call gate over an invoke request, as Gate/Invoke decides it, then the human
 * approval the workflow asks for an allowed call. */
static int decide_invoke(const off_suite *s, const json_t *req, const char *p, long long now,
                         const json_t *revoked, off_verdict *v)
{
    const workflow_step *st = case_step(s, req, p);
    if (st == NULL)
        return OFF_USAGE;
    json_t *request = NULL, *summaries = NULL;
    int rv = invoke_request(s, st, req, p, &request, &summaries);
    if (rv != OFF_OK) {
        json_decref(summaries);
        return rv;
    }
    const char *tool = json_string_value(json_object_get(req, "tool"));
    const char *dest = json_string_value(json_object_get(request, "destination"));
    snprintf(v->what, sizeof v->what, "invoke %s to %s (step %s)", tool, dest ? dest : "-",
             st->cap.step);
    json_t *chain_j = chain_json(s, st->cap.grant, revoked, now);
    evaluator_invoke_facts f;
    guard_context ctx = {0};
    rv = evaluator_invoke_facts_from(request, summaries, chain_j, &f) == STATUS_OK &&
                 context_of(st, &ctx) == 0 &&
                 evaluator_invoke_decide(&st->cap, &ctx, &f, (double)now, &v->d) == 0
             ? OFF_OK
             : off_fail(s, p, "the facts could not be built (out of memory)");
    if (rv == OFF_OK && v->d.outcome == GUARD_ALLOW)
        workflow_approval_for(s->wf, tool, dest, &v->approver, &v->within_ms);
    /* The allowed decision borrows the chain and the sources from the facts freed here. */
    free(v->d.chain_order.items);
    free(v->d.sources.items);
    memset(&v->d.chain_order, 0, sizeof v->d.chain_order);
    memset(&v->d.sources, 0, sizeof v->d.sources);
    facts_context_free(&ctx);
    evaluator_invoke_facts_free(&f);
    json_decref(chain_j);
    json_decref(summaries);
    json_decref(request);
    return rv;
}

/* The expect of a case: an outcome, and codes and a witness only for a refusal. */
static int expect_check(const off_suite *s, const json_t *x, const char *p)
{
    char f[192];
    snprintf(f, sizeof f, "%s.expect", p);
    int rv = off_object(s, x, f, expect_spec, sizeof expect_spec / sizeof expect_spec[0]);
    if (rv != OFF_OK)
        return rv;
    const char *outcome = json_string_value(json_object_get(x, "outcome"));
    const json_t *codes = json_object_get(x, "codes");
    if (strcmp(outcome, "allow") != 0 && strcmp(outcome, "deny") != 0 &&
        strcmp(outcome, "unknown") != 0)
        return off_fail(s, f, "outcome: \"%.64s\" is not one of allow, deny, unknown", outcome);
    if (strcmp(outcome, "allow") == 0 && (codes != NULL || json_object_get(x, "witness") != NULL))
        return off_fail(s, f, "an allow carries no codes and no witness (leave them out)");
    for (size_t i = 0; i < json_array_size(codes); i++) {
        const char *c = json_string_value(json_array_get(codes, i));
        if (c == NULL || (decision_code_from_name(c) < 0 && strcmp(c, OFF_APPROVAL_PENDING) != 0))
            return off_fail(s, f,
                            "codes[%zu]: \"%.64s\" is not a decision code (e.g. "
                            "INPUT_OUT_OF_SCOPE, or APPROVAL_PENDING)",
                            i, c != NULL ? c : "");
    }
    return OFF_OK;
}

/* The verdict as charterd answers it: a send held for a human is UNKNOWN APPROVAL_PENDING
 * (nothing delivered yet). Fills *outcome and the codes as names into codes (comma-separated). */
static void verdict_words(const off_verdict *v, const char **outcome, char *codes, size_t n)
{
    if (v->approver != NULL) {
        *outcome = "unknown";
        snprintf(codes, n, "%s", OFF_APPROVAL_PENDING);
        return;
    }
    *outcome = decision_outcome_name(v->d.outcome);
    guard_codes_format(v->d.codes, codes, n);
}

/* True when the comma-separated names hold exactly the codes of the list x (order aside). */
static bool codes_equal(const json_t *x, const char *names)
{
    size_t n = 0;
    for (const char *p = names; *p != '\0'; n++) {
        size_t len = strcspn(p, ",");
        bool listed = false;
        for (size_t i = 0; i < json_array_size(x) && !listed; i++) {
            const char *c = json_string_value(json_array_get(x, i));
            listed = strlen(c) == len && strncmp(c, p, len) == 0;
        }
        if (!listed)
            return false;
        p += len + (p[len] == ',');
    }
    return n == json_array_size(x);
}

/* "deny INPUT_OUT_OF_SCOPE witness "..."" of an outcome, codes and witness into buf. */
static void decision_line(const char *outcome, const char *codes, const char *witness, char *buf,
                          size_t n)
{
    int used = snprintf(buf, n, "%s%s%s", outcome, codes[0] != '\0' ? " " : "", codes);
    if (witness != NULL && witness[0] != '\0' && used >= 0 && (size_t)used < n)
        snprintf(buf + used, n - (size_t)used, " witness \"%s\"", witness);
}

/* Keeps one case's result; nothing is printed before every case was checked and decided, so a
 * test file that breaks a rule prints that rule alone. */
static void report(off_suite *s, size_t i, const char *name, const char *what, bool pass,
                   const char *expected, const char *observed)
{
    if (pass)
        s->passed++;
    else
        s->failed++;
    json_array_append_new(s->results, json_pack("{s:I, s:s, s:s, s:b, s:s, s:s}", "index",
                                                (json_int_t)i, "name", name, "facts", what, "pass",
                                                pass, "expected", expected, "observed", observed));
}

/* Compares the verdict with the case's expect and reports it. */
static void case_judge(off_suite *s, size_t i, const json_t *c, const off_verdict *v)
{
    const json_t *x = json_object_get(c, "expect");
    const char *want = json_string_value(json_object_get(x, "outcome"));
    const json_t *want_codes = json_object_get(x, "codes");
    const char *want_witness = json_string_value(json_object_get(x, "witness"));
    const char *outcome;
    char codes[512], expected[2048], observed[2048], listed[512] = "";
    verdict_words(v, &outcome, codes, sizeof codes);
    bool pass = strcmp(want, outcome) == 0 &&
                (want_codes == NULL || codes_equal(want_codes, codes)) &&
                (want_witness == NULL ||
                 strcmp(want_witness, v->d.witness != NULL ? v->d.witness : "") == 0);
    for (size_t k = 0, used = 0; k < json_array_size(want_codes) && used < sizeof listed; k++)
        used += (size_t)snprintf(listed + used, sizeof listed - used, "%s%s", k ? "," : "",
                                 json_string_value(json_array_get(want_codes, k)));
    decision_line(want, listed, want_witness, expected, sizeof expected);
    decision_line(outcome, codes, v->d.witness, observed, sizeof observed);
    if (v->approver != NULL) {
        size_t used = strlen(observed);
        snprintf(observed + used, sizeof observed - used,
                 " (the gate allows it; held for %s's approval within %lld ms)", v->approver,
                 v->within_ms);
    }
    char name[64];
    snprintf(name, sizeof name, "case %zu", i);
    const char *given = json_string_value(json_object_get(c, "name"));
    report(s, i, given != NULL ? given : name, v->what, pass, expected, observed);
}

/* cases[i]: checked, decided under its facts (its own now and revocations), judged. */
static int case_run(off_suite *s, size_t i)
{
    const json_t *c = json_array_get(json_object_get(s->doc, "cases"), i);
    char p[64], f[128];
    snprintf(p, sizeof p, "cases[%zu]", i);
    int rv = off_object(s, c, p, case_spec, sizeof case_spec / sizeof case_spec[0]);
    long long now = s->now;
    snprintf(f, sizeof f, "%s.now", p);
    if (rv == OFF_OK)
        rv = off_time(s, json_object_get(c, "now"), f, &now);
    snprintf(f, sizeof f, "%s.revoked", p);
    const json_t *revoked = json_object_get(c, "revoked");
    if (rv == OFF_OK)
        rv = off_refs(s, revoked, f, "grants", "a grant of the workflow");
    if (rv == OFF_OK)
        rv = expect_check(s, json_object_get(c, "expect"), p);
    if (rv != OFF_OK)
        return rv;
    /* The gate it asks: the first of the table the case names, which must be the only one. */
    static const struct {
        const char *key;
        const off_field *spec;
        size_t n;
    } gates[] = {
        {"input", input_spec, sizeof input_spec / sizeof input_spec[0]},
        {"deliver", deliver_spec, sizeof deliver_spec / sizeof deliver_spec[0]},
        {"read", read_spec, sizeof read_spec / sizeof read_spec[0]},
        {"invoke", invoke_spec, sizeof invoke_spec / sizeof invoke_spec[0]},
    };
    size_t named = 0, g = 0;
    for (size_t k = sizeof gates / sizeof gates[0]; k-- > 0;)
        if (json_object_get(c, gates[k].key) != NULL)
            named++, g = k;
    if (named != 1)
        return off_fail(s, p,
                        "needs exactly one of input, deliver, read, invoke (the gate it asks)");
    const json_t *req = json_object_get(c, gates[g].key);
    snprintf(f, sizeof f, "%s.%s", p, gates[g].key);
    if ((rv = off_object(s, req, f, gates[g].spec, gates[g].n)) != OFF_OK)
        return rv;
    off_verdict v;
    memset(&v, 0, sizeof v);
    rv = g == 0   ? decide_input(s, req, f, &v)
         : g == 1 ? decide_deliver(s, req, f, now, revoked, &v)
         : g == 2 ? decide_read(s, req, f, &v)
                  : decide_invoke(s, req, f, now, revoked, &v);
    if (rv == OFF_OK)
        case_judge(s, i, c, &v);
    guard_decision_free(&v.d);
    return rv;
}

/* ---- the suite --------------------------------------------------------------------------- */

static const off_field suite_spec[] = {
    {"workflow", JSON_STRING, true},
    {"now", JSON_STRING, false},
    {"artifacts", JSON_ARRAY, false},
    {"cases", JSON_ARRAY, true},
};

/* The workflow the test file names, relative to the test file's folder unless absolute, loaded
 * with charterd's loader. OFF_FAIL when it is not valid: the thing under test fails. */
static int suite_workflow(off_suite *s)
{
    const char *name = json_string_value(json_object_get(s->doc, "workflow"));
    const char *slash = strrchr(s->path, '/');
    char path[4096], err[1024];
    if (name[0] == '/' || slash == NULL)
        snprintf(path, sizeof path, "%s", name);
    else
        snprintf(path, sizeof path, "%.*s/%s", (int)(slash - s->path), s->path, name);
    if (workflow_load_file(path, &s->wf, err, sizeof err) != 0) {
        fprintf(stderr,
                "charter: %s: workflow %s is not valid: %s (charter workflow validate %s "
                "lists every problem)\n",
                s->path, path, err, path);
        return OFF_FAIL;
    }
    if ((s->seed = workflow_seed_json(s->wf)) == NULL)
        return off_fail(s, "workflow", "out of memory");
    /* By default a case is decided at the first moment every grant of the workflow is valid. */
    const json_t *grants = json_object_get(s->seed, "grants");
    for (size_t i = 0; i < json_array_size(grants); i++) {
        long long from =
            json_integer_value(json_object_get(json_array_get(grants, i), "valid_from"));
        s->now = from > s->now ? from : s->now;
    }
    return OFF_OK;
}

/* Reads, parses and checks the test file's top level, loads its workflow and its artifacts. */
static int suite_load(off_suite *s)
{
    char *bytes = NULL;
    size_t len = 0;
    if (cli_workflow_read(s->path, &bytes, &len) != 0)
        return OFF_USAGE;
    json_error_t jerr;
    s->doc = json_loadb(bytes, len, JSON_REJECT_DUPLICATES, &jerr);
    free(bytes);
    if (s->doc == NULL)
        return off_fail(s, "test file", "not valid JSON at line %d column %d: %s", jerr.line,
                        jerr.column, jerr.text);
    if (json_object_get(s->doc, "steps") != NULL && json_object_get(s->doc, "cases") == NULL) {
        fprintf(stderr,
                "charter: %s is a workflow definition, not a test file (docs/workflows.md, "
                "\"Test files\"): charter workflow validate %s checks it; charter workflow "
                "rehearse %s runs its expect list on a charterd\n",
                s->path, s->path, s->path);
        return OFF_USAGE;
    }
    int rv =
        off_object(s, s->doc, "test file", suite_spec, sizeof suite_spec / sizeof suite_spec[0]);
    if (rv == OFF_OK && json_array_size(json_object_get(s->doc, "cases")) == 0)
        rv = off_fail(s, "cases", "must hold at least one case");
    if (rv == OFF_OK)
        rv = suite_workflow(s);
    if (rv == OFF_OK)
        rv = off_time(s, json_object_get(s->doc, "now"), "now", &s->now);
    const json_t *arts = json_object_get(s->doc, "artifacts");
    if (rv == OFF_OK && (s->arts = calloc(json_array_size(arts) + 1, sizeof *s->arts)) == NULL)
        rv = off_fail(s, "artifacts", "out of memory");
    for (size_t i = 0; rv == OFF_OK && i < json_array_size(arts); i++)
        rv = art_load(s, i);
    return rv;
}

static const char *result_text(const json_t *r, const char *key)
{
    return json_string_value(json_object_get(r, key));
}

static int suite_print(const off_suite *s)
{
    if (s->json) {
        json_t *out =
            json_pack("{s:s, s:s, s:s, s:I, s:I, s:O}", "testFile", s->path, "workflow",
                      s->wf->name, "version", s->wf->version, "passed", (json_int_t)s->passed,
                      "failed", (json_int_t)s->failed, "results", s->results);
        int rv = cli_json_print(out);
        json_decref(out);
        return rv == 0 ? OFF_OK : OFF_FAIL;
    }
    char when[32];
    time_t t = (time_t)s->now;
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    printf("workflow %s version %s: %zu cases decided offline (at %s unless a case says)\n\n",
           s->wf->name, s->wf->version, json_array_size(s->results), when);
    size_t i;
    const json_t *r;
    json_array_foreach(s->results, i, r)
    {
        printf("%s  cases[%zu]  %s\n      %s\n      expected: %s\n      observed: %s\n",
               json_is_true(json_object_get(r, "pass")) ? "PASS" : "FAIL", i,
               result_text(r, "name"), result_text(r, "facts"), result_text(r, "expected"),
               result_text(r, "observed"));
    }
    printf("\n%u of %u cases passed%s\n", s->passed, s->passed + s->failed,
           s->failed > 0 ? "" : ": ok");
    return OFF_OK;
}

int cli_workflow_test(const char *path, bool json)
{
    off_suite s;
    memset(&s, 0, sizeof s);
    s.path = path;
    s.json = json;
    int rv = (s.results = json_array()) != NULL ? suite_load(&s) : OFF_FAIL;
    for (size_t i = 0; rv == OFF_OK && i < json_array_size(json_object_get(s.doc, "cases")); i++)
        rv = case_run(&s, i);
    if (rv == OFF_OK)
        rv = suite_print(&s);
    if (rv == OFF_OK && s.failed > 0)
        rv = OFF_FAIL;
    json_decref(s.results);
    free(s.arts);
    json_decref(s.seed);
    workflow_free(s.wf);
    json_decref(s.doc);
    return rv;
}
