/*
 * test_workflow.c - the workflow definition loader, its validation rules, the seed it hands to
 * charter_seed, public rendering, and the scripted model. Pure: no database.
 *
 * Bad definitions are written by hand below with ' for " (swapped before loading), each one
 * small change away from the minimal valid definition DEF(...), and each must be refused with
 * a reason that names the field path and the rule.
 */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runs/ask.h"
#include "runs/model.h"
#include "policy/workflow.h"
#include "suite.h"

#ifndef CHARTER_SOURCE_DIR
#error "CHARTER_SOURCE_DIR (the source tree's root) must be defined by the build"
#endif

#define PROCUREMENT_PATH CHARTER_SOURCE_DIR "/deploy/workflows/procurement.json"
#define SUPPORT_PATH CHARTER_SOURCE_DIR "/deploy/workflows/support.json"

/* ---- the minimal valid definition, in parts ---------------------------------------------- */

#define T0 "2026-01-01T00:00:00Z"
#define T1 "2030-01-01T00:00:00Z"
#define R_QUOTE                                                                                    \
    "{'id':'quote','title':'Quote','confidentiality':'public','integrity':'untrusted',"            \
    "'content':'q'}"
#define R_MEMO                                                                                     \
    "{'id':'memo','title':'Memo','confidentiality':'confidential','integrity':'trusted',"          \
    "'content':'m'}"
#define RES_OK R_QUOTE "," R_MEMO
#define RCP_OK "{'id':'pub','clearance':'public'},{'id':'boss','clearance':'confidential'}"
#define ACT_OK                                                                                     \
    "{'id':'owner','kind':'human'},{'id':'bot','kind':'agent'},{'id':'bot2','kind':'agent'}"
#define G_ROOT                                                                                     \
    "{'id':'g_root','grantee':'owner','issuer':'owner','tools':['read','send'],"                   \
    "'recipients':['pub','boss'],'resources':['quote','memo'],'valid_from':'" T0 "',"              \
    "'valid_to':'" T1 "'}"
#define G_BOT                                                                                      \
    "{'id':'g_bot','grantee':'bot','delegated_from':'g_root','tools':['read','send'],"             \
    "'recipients':['pub'],'resources':['quote'],'valid_from':'" T0 "','valid_to':'" T1 "'}"
#define GRANTS_OK G_ROOT "," G_BOT
#define STEP_ONE                                                                                   \
    "{'name':'one','actor':'bot','grant':'g_bot','tools':['read','send'],'recipients':['pub'],"    \
    "'resources':['quote'],'reads':['quote'],'receives':[],'output_title':'Out',"                  \
    "'deliver':{'tool':'send','recipient':'pub'},'script':{'content':'c','handoff':['output']}}"
#define REST(res, rcp, act, grants, steps)                                                         \
    "'resources':[" res "],'recipients':[" rcp "],'actors':[" act "],'grants':[" grants            \
    "],'steps':[" steps "]"
#define DEF(res, rcp, act, grants, steps)                                                          \
    "{'name':'mini','task':'Compare quotes.'," REST(res, rcp, act, grants, steps) "}"
#define DEF_OK DEF(RES_OK, RCP_OK, ACT_OK, GRANTS_OK, STEP_ONE)
#define DEF_RES(res) DEF(res, RCP_OK, ACT_OK, GRANTS_OK, STEP_ONE)
#define DEF_GRANTS(grants) DEF(RES_OK, RCP_OK, ACT_OK, grants, STEP_ONE)
#define DEF_STEPS(steps) DEF(RES_OK, RCP_OK, ACT_OK, GRANTS_OK, steps)

/* A step of g_bot with the given lists and extra fields (extra starts with ',' or is ""). */
#define STEP(name, tools, rcps, res, reads, receives, extra)                                       \
    "{'name':'" name "','actor':'bot','grant':'g_bot','tools':[" tools "],'recipients':[" rcps     \
    "],'resources':[" res "],'reads':[" reads "],'receives':[" receives                            \
    "],'output_title':'Out'" extra "}"

/* ---- helpers ------------------------------------------------------------------------------ */

/* A malloc'd copy of s with every ' turned into ". */
static char *dq(const char *s)
{
    char *out = strdup(s);
    if (out == NULL) {
        return NULL;
    }
    for (char *p = out; *p != '\0'; p++) {
        if (*p == '\'') {
            *p = '"';
        }
    }
    return out;
}

/* A malloc'd copy of tmpl (with ' for ") in which the first "@@" is replaced by fill. */
static char *dq_fill(const char *tmpl, const char *fill)
{
    char *t = dq(tmpl);
    if (t == NULL) {
        return NULL;
    }
    char *at = strstr(t, "@@");
    if (at == NULL) {
        return t;
    }
    size_t n = strlen(t) - 2 + strlen(fill) + 1;
    char *out = malloc(n);
    if (out != NULL) {
        snprintf(out, n, "%.*s%s%s", (int)(at - t), t, fill, at + 2);
    }
    free(t);
    return out;
}

static bool str_eq(const char *a, const char *b)
{
    return a != NULL && b != NULL && strcmp(a, b) == 0;
}

static bool strs_are(const guard_strs *s, size_t n, const char *const *want)
{
    if (s->n != n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!str_eq(s->items[i], want[i])) {
            return false;
        }
    }
    return true;
}

/* Loads json (already with real quotes); the result must be a refusal whose reason contains
 * expect and is one line. */
static void expect_refused_json(const char *json, const char *expect)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    workflow *wf = NULL;
    char err[512] = "";
    int rc = workflow_load_buffer(json, strlen(json), &wf, err, sizeof err);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_PTR_NULL(wf);
    if (strstr(err, expect) == NULL) {
        fprintf(stderr, "\n    expected: %s\n    got:      %s\n", expect, err);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(err, expect));
    CU_ASSERT_PTR_NULL(strchr(err, '\n'));
    workflow_free(wf);
}

static void expect_refused(const char *def, const char *expect)
{
    char *json = dq(def);
    expect_refused_json(json, expect);
    free(json);
}

/* Loads def (with ' for "); must succeed. Caller frees the workflow. */
static workflow *load_ok(const char *def)
{
    char *json = dq(def);
    workflow *wf = NULL;
    char err[512] = "";
    int rc = json == NULL ? -1 : workflow_load_buffer(json, strlen(json), &wf, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "\n    unexpected refusal: %s\n", err);
    }
    CU_ASSERT_EQUAL(rc, 0);
    free(json);
    return wf;
}

static workflow *load_procurement(void)
{
    workflow *wf = NULL;
    char err[512] = "";
    int rc = workflow_load_file(PROCUREMENT_PATH, &wf, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "\n    %s\n", err);
    }
    CU_ASSERT_EQUAL(rc, 0);
    return wf;
}

/* ---- the reference workflow --------------------------------------------------------------- */

static void test_reference_workflow_loads_with_its_steps(void)
{
    workflow *wf = load_procurement();
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    CU_ASSERT_TRUE(str_eq(wf->name, "procurement"));
    CU_ASSERT_PTR_NOT_NULL(strstr(wf->task, "Compare three desk vendors"));
    CU_ASSERT_EQUAL(strlen(wf->version), 64);
    CU_ASSERT_EQUAL(strspn(wf->version, "0123456789abcdef"), 64);
    CU_ASSERT_EQUAL_FATAL(wf->n_steps, 3);

    static const char *const vendors[] = {"vendor_a", "vendor_b", "vendor_c"};
    static const char *const all4[] = {"vendor_a", "vendor_b", "vendor_c", "budget"};

    const workflow_step *r = &wf->steps[0];
    CU_ASSERT_TRUE(str_eq(r->cap.step, "research"));
    CU_ASSERT_TRUE(str_eq(r->cap.actor, "researcher"));
    CU_ASSERT_TRUE(str_eq(r->cap.grant, "g_research"));
    CU_ASSERT_TRUE(strs_are(&r->cap.tools, 1, (const char *const[]){"read_source"}));
    CU_ASSERT_EQUAL(r->cap.recipients.n, 0);
    CU_ASSERT_TRUE(strs_are(&r->cap.resources, 3, vendors));
    CU_ASSERT_TRUE(strs_are(&r->reads, 3, vendors));
    CU_ASSERT_EQUAL(r->receives.n, 0);
    CU_ASSERT_TRUE(str_eq(r->output_title, "Research summary"));
    CU_ASSERT_PTR_NULL(r->deliver_tool);
    CU_ASSERT_PTR_NULL(r->deliver_recipient);
    CU_ASSERT_PTR_NULL(r->public_fields);
    CU_ASSERT_PTR_NULL(r->public_template);
    CU_ASSERT_PTR_NOT_NULL(r->script);
    CU_ASSERT_FALSE(r->recovery);

    const workflow_step *a = &wf->steps[1];
    CU_ASSERT_TRUE(str_eq(a->cap.step, "analyze"));
    CU_ASSERT_TRUE(str_eq(a->cap.actor, "analyst"));
    CU_ASSERT_TRUE(str_eq(a->cap.grant, "g_analyst"));
    CU_ASSERT_TRUE(
        strs_are(&a->cap.tools, 2, (const char *const[]){"read_source", "deliver_internal"}));
    CU_ASSERT_TRUE(strs_are(&a->cap.recipients, 1, (const char *const[]){"cfo"}));
    CU_ASSERT_TRUE(strs_are(&a->cap.resources, 4, all4));
    CU_ASSERT_TRUE(strs_are(&a->reads, 1, (const char *const[]){"budget"}));
    CU_ASSERT_TRUE(strs_are(&a->receives, 1, (const char *const[]){"research"}));
    CU_ASSERT_TRUE(str_eq(a->output_title, "Internal recommendation"));
    CU_ASSERT_TRUE(str_eq(a->deliver_tool, "deliver_internal"));
    CU_ASSERT_TRUE(str_eq(a->deliver_recipient, "cfo"));
    CU_ASSERT_PTR_NULL(a->public_fields);
    CU_ASSERT_FALSE(a->recovery);

    const workflow_step *p = &wf->steps[2];
    CU_ASSERT_TRUE(str_eq(p->cap.step, "report"));
    CU_ASSERT_TRUE(str_eq(p->cap.actor, "reporter"));
    CU_ASSERT_TRUE(str_eq(p->cap.grant, "g_reporter"));
    CU_ASSERT_TRUE(strs_are(&p->cap.tools, 1, (const char *const[]){"deliver_public"}));
    CU_ASSERT_TRUE(strs_are(&p->cap.recipients, 1, (const char *const[]){"public"}));
    CU_ASSERT_TRUE(strs_are(&p->cap.resources, 3, vendors));
    CU_ASSERT_EQUAL(p->reads.n, 0);
    CU_ASSERT_TRUE(strs_are(&p->receives, 1, (const char *const[]){"analyze"}));
    CU_ASSERT_TRUE(str_eq(p->output_title, "Public vendor comparison"));
    CU_ASSERT_TRUE(str_eq(p->deliver_tool, "deliver_public"));
    CU_ASSERT_TRUE(str_eq(p->deliver_recipient, "public"));
    CU_ASSERT_TRUE(p->recovery);
    CU_ASSERT_EQUAL(json_object_size(p->public_fields), 3);
    CU_ASSERT_PTR_NOT_NULL(json_object_get(p->public_fields, "recommended_vendor"));
    CU_ASSERT_PTR_NOT_NULL(p->public_template);
    CU_ASSERT_PTR_NULL(strstr(p->public_template, "48"));

    CU_ASSERT_PTR_EQUAL(workflow_step_find(wf, "analyze"), &wf->steps[1]);
    CU_ASSERT_PTR_EQUAL(workflow_step_find(wf, "report"), &wf->steps[2]);
    CU_ASSERT_PTR_NULL(workflow_step_find(wf, "publish"));
    CU_ASSERT_PTR_NULL(workflow_step_find(wf, NULL));
    CU_ASSERT_PTR_EQUAL(workflow_recovery_step(wf), &wf->steps[2]);
    workflow_free(wf);
}

static void test_reference_workflow_keeps_its_injection_and_canary(void)
{
    workflow *wf = load_procurement();
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    json_t *res = json_object_get(wf->doc, "resources");
    CU_ASSERT_EQUAL_FATAL(json_array_size(res), 4);
    const char *vendor_c = json_string_value(json_object_get(json_array_get(res, 2), "content"));
    const char *budget = json_string_value(json_object_get(json_array_get(res, 3), "content"));
    CU_ASSERT_PTR_NOT_NULL(strstr(vendor_c, "NOTE TO THE ANALYST AGENT"));
    CU_ASSERT_PTR_NOT_NULL(strstr(budget, "CEILING-48200"));
    workflow_free(wf);
}

static void test_seed_json_has_labels_and_epoch_seconds(void)
{
    workflow *wf = load_procurement();
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    json_t *seed = workflow_seed_json(wf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(seed);
    CU_ASSERT_EQUAL(json_object_size(seed), 4);

    json_t *res = json_object_get(seed, "resources");
    CU_ASSERT_EQUAL_FATAL(json_array_size(res), 4);
    json_t *vc = json_array_get(res, 2), *budget = json_array_get(res, 3);
    CU_ASSERT_TRUE(str_eq(json_string_value(json_object_get(vc, "id")), "vendor_c"));
    CU_ASSERT_TRUE(
        str_eq(json_string_value(json_object_get(vc, "title")), "Cascade Furniture quote"));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(vc, "conf")), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(vc, "integrity")), 0);
    CU_ASSERT_TRUE(str_eq(json_string_value(json_object_get(budget, "id")), "budget"));
    CU_ASSERT_TRUE(json_is_integer(json_object_get(budget, "conf")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(budget, "conf")), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(budget, "integrity")), 1);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(json_string_value(json_object_get(budget, "content")), "CEILING-48200"));
    CU_ASSERT_EQUAL(json_object_size(budget), 5);

    json_t *rcp = json_object_get(seed, "recipients");
    CU_ASSERT_EQUAL_FATAL(json_array_size(rcp), 2);
    CU_ASSERT_TRUE(str_eq(json_string_value(json_object_get(json_array_get(rcp, 0), "id")), "cfo"));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_array_get(rcp, 0), "clearance")), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_array_get(rcp, 1), "clearance")), 0);

    json_t *act = json_object_get(seed, "actors");
    CU_ASSERT_EQUAL_FATAL(json_array_size(act), 4);
    CU_ASSERT_TRUE(
        str_eq(json_string_value(json_object_get(json_array_get(act, 0), "id")), "human_cfo"));
    CU_ASSERT_TRUE(
        str_eq(json_string_value(json_object_get(json_array_get(act, 0), "kind")), "human"));
    CU_ASSERT_TRUE(
        str_eq(json_string_value(json_object_get(json_array_get(act, 3), "kind")), "agent"));

    json_t *grants = json_object_get(seed, "grants");
    CU_ASSERT_EQUAL_FATAL(json_array_size(grants), 4);
    json_t *root = json_array_get(grants, 0);
    CU_ASSERT_TRUE(str_eq(json_string_value(json_object_get(root, "id")), "g_root"));
    CU_ASSERT_TRUE(json_is_true(json_object_get(root, "root")));
    CU_ASSERT_TRUE(str_eq(json_string_value(json_object_get(root, "issuer")), "human_cfo"));
    CU_ASSERT_TRUE(str_eq(json_string_value(json_object_get(root, "grantee")), "human_cfo"));
    CU_ASSERT_PTR_NULL(json_object_get(root, "delegated_from"));
    CU_ASSERT_TRUE(json_is_integer(json_object_get(root, "valid_from")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(root, "valid_from")), 1767225600);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(root, "valid_to")), 2082758400);

    json_t *research = json_array_get(grants, 1);
    CU_ASSERT_TRUE(json_is_false(json_object_get(research, "root")));
    CU_ASSERT_TRUE(json_is_array(json_object_get(research, "recipients")));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(research, "recipients")), 0);

    json_t *rep = json_array_get(grants, 3);
    CU_ASSERT_TRUE(str_eq(json_string_value(json_object_get(rep, "id")), "g_reporter"));
    CU_ASSERT_TRUE(json_is_false(json_object_get(rep, "root")));
    CU_ASSERT_TRUE(str_eq(json_string_value(json_object_get(rep, "delegated_from")), "g_analyst"));
    CU_ASSERT_PTR_NULL(json_object_get(rep, "issuer"));
    CU_ASSERT_TRUE(str_eq(json_string_value(json_object_get(rep, "grantee")), "reporter"));
    json_t *tools = json_object_get(rep, "tools");
    CU_ASSERT_EQUAL(json_array_size(tools), 1);
    CU_ASSERT_TRUE(str_eq(json_string_value(json_array_get(tools, 0)), "deliver_public"));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(rep, "resources")), 3);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(rep, "valid_from")), 1767225600);

    json_decref(seed);
    workflow_free(wf);
}

static void test_version_is_sha256_of_the_bytes(void)
{
    char *json = dq(DEF_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    workflow *wf = NULL;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(workflow_load_buffer(json, strlen(json), &wf, err, sizeof err), 0);
    /* sha256sum of the minimal definition's bytes, computed outside the program. */
    if (strcmp(wf->version, "2c364be455bd54b6feb7620c675bff00a09e2aa60ab621d45919c02f5b927c3c") !=
        0) {
        fprintf(stderr, "\n    version %s of %s\n", wf->version, json);
    }
    CU_ASSERT_STRING_EQUAL(wf->version,
                           "2c364be455bd54b6feb7620c675bff00a09e2aa60ab621d45919c02f5b927c3c");
    workflow_free(wf);

    /* The same definition with one more byte of whitespace is another version. */
    size_t n = strlen(json);
    char *longer = malloc(n + 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(longer);
    memcpy(longer, json, n);
    longer[n] = '\n';
    longer[n + 1] = '\0';
    CU_ASSERT_EQUAL_FATAL(workflow_load_buffer(longer, n + 1, &wf, err, sizeof err), 0);
    CU_ASSERT_STRING_NOT_EQUAL(wf->version,
                               "2c364be455bd54b6feb7620c675bff00a09e2aa60ab621d45919c02f5b927c3c");
    workflow_free(wf);
    free(longer);
    free(json);
}

static void test_missing_file_is_refused_with_its_path(void)
{
    workflow *wf = NULL;
    char err[256] = "";
    CU_ASSERT_EQUAL(workflow_load_file("/nonexistent/charter/wf.json", &wf, err, sizeof err), -1);
    CU_ASSERT_PTR_NULL(wf);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent/charter/wf.json: cannot open"));
}

/* ---- valid edge cases --------------------------------------------------------------------- */

static void test_minimal_definition_loads(void)
{
    workflow *wf = load_ok(DEF_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    CU_ASSERT_EQUAL(wf->n_steps, 1);
    CU_ASSERT_TRUE(str_eq(wf->steps[0].deliver_tool, "send"));
    CU_ASSERT_PTR_NULL(workflow_recovery_step(wf));
    workflow_free(wf);
}

static void test_empty_allowlists_load_as_deny_all(void)
{
    workflow *wf = load_ok(DEF_STEPS(STEP("one", "", "", "", "", "", "")));
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    const workflow_step *s = &wf->steps[0];
    CU_ASSERT_EQUAL(s->cap.tools.n, 0);
    CU_ASSERT_EQUAL(s->cap.recipients.n, 0);
    CU_ASSERT_EQUAL(s->cap.resources.n, 0);
    CU_ASSERT_EQUAL(s->reads.n, 0);
    CU_ASSERT_PTR_NULL(s->deliver_tool);
    CU_ASSERT_PTR_NULL(s->script);
    workflow_free(wf);

    /* A grant with empty lists delegates nothing, and is still a valid grant. */
    wf = load_ok(DEF_GRANTS(G_ROOT "," G_BOT ",{'id':'g_none','grantee':'bot2','delegated_from':"
                                   "'g_bot','tools':[],'recipients':[],'resources':[],"
                                   "'valid_from':'" T0 "','valid_to':'" T1 "'}"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    json_t *seed = workflow_seed_json(wf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(seed);
    json_t *g = json_array_get(json_object_get(seed, "grants"), 2);
    CU_ASSERT_TRUE(json_is_array(json_object_get(g, "tools")));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(g, "tools")), 0);
    json_decref(seed);
    workflow_free(wf);
}

static void test_limits_are_inclusive(void)
{
    /* 256 resources (the limit) and content of exactly 65536 bytes load. */
    size_t cap = 300 * 128;
    char *res = malloc(cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(res);
    size_t used = (size_t)snprintf(res, cap, "%s", RES_OK);
    for (int i = 2; i < 256; i++) {
        used += (size_t)snprintf(res + used, cap - used,
                                 ",{'id':'r%d','title':'R','confidentiality':'public',"
                                 "'integrity':'untrusted','content':'@@'}",
                                 i);
    }
    char *big = malloc(65537);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    memset(big, 'x', 65536);
    big[65536] = '\0';
    char *def = malloc(strlen(res) + 2048);
    CU_ASSERT_PTR_NOT_NULL_FATAL(def);
    sprintf(def,
            "{'name':'mini','task':'t','resources':[%s],'recipients':[" RCP_OK "],'actors':[" ACT_OK
            "],'grants':[" GRANTS_OK "],'steps':[" STEP_ONE "]}",
            res);
    char *json = dq_fill(def, big);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    workflow *wf = NULL;
    char err[512] = "";
    int rc = workflow_load_buffer(json, strlen(json), &wf, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "\n    %s\n", err);
    }
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(wf->doc, "resources")), 256);
    workflow_free(wf);
    free(json);
    free(def);
    free(big);
    free(res);
}

/* ---- refusals: shape ---------------------------------------------------------------------- */

static void test_unknown_top_level_field_is_refused(void)
{
    expect_refused("{'name':'mini','task':'t','colour':'red'," REST(RES_OK, RCP_OK, ACT_OK,
                                                                    GRANTS_OK, STEP_ONE) "}",
                   "colour: unknown field");
}

static void test_unknown_nested_field_is_refused(void)
{
    expect_refused(DEF_STEPS(STEP("one", "'send'", "'pub'", "'quote'", "", "",
                                  ",'deliver':{'tool':'send','recipient':'pub','cc':'boss'}")),
                   "steps[0].deliver.cc: unknown field");
    expect_refused(DEF_RES(R_QUOTE ",{'id':'memo','title':'Memo','confidentiality':'public',"
                                   "'integrity':'trusted','content':'m','owner':'cfo'}"),
                   "resources[1].owner: unknown field");
}

static void test_wrong_type_is_refused(void)
{
    expect_refused(DEF_GRANTS(G_ROOT ",{'id':'g_bot','grantee':'bot','delegated_from':'g_root',"
                                     "'tools':'read','recipients':['pub'],'resources':['quote'],"
                                     "'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[1].tools: must be a list");
    expect_refused(DEF_STEPS(STEP("one", "", "", "", "", "", ",'recovery':'yes'")),
                   "steps[0].recovery: must be true or false");
    expect_refused(DEF_STEPS(STEP("one", "'read',7", "", "", "", "", "")),
                   "steps[0].tools[1]: must be a string");
    expect_refused("[" DEF_OK "]", "definition: must be an object");
}

static void test_missing_required_field_is_refused(void)
{
    expect_refused(DEF_RES(R_QUOTE ",{'id':'memo','title':'Memo','confidentiality':'public',"
                                   "'integrity':'trusted'}"),
                   "resources[1].content: required field is missing");
    expect_refused("{'name':'mini','task':'t','resources':[" RES_OK "],'recipients':[" RCP_OK
                   "],'actors':[" ACT_OK "],'grants':[" GRANTS_OK "]}",
                   "steps: required field is missing");
    /* An allowlist left out is an error, never "unrestricted". */
    expect_refused(DEF_STEPS("{'name':'one','actor':'bot','grant':'g_bot','tools':[],"
                             "'resources':[],'reads':[],'receives':[],'output_title':'Out'}"),
                   "steps[0].recipients: required field is missing");
}

static void test_invalid_json_and_duplicate_keys_are_refused(void)
{
    expect_refused("{'name':'mini',", "definition: not valid JSON");
    expect_refused("{'name':'mini','name':'other','task':'t'}", "duplicate object key");
}

static void test_file_over_one_mebibyte_is_refused(void)
{
    size_t n = WORKFLOW_MAX_FILE_BYTES + 1;
    char *buf = malloc(n + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    memset(buf, ' ', n);
    buf[0] = '{';
    buf[n - 1] = '}';
    buf[n] = '\0';
    expect_refused_json(buf, "definition: 1048577 bytes, at most 1048576 (limit)");
    free(buf);
}

/* ---- refusals: ids and labels ------------------------------------------------------------- */

static void test_bad_id_characters_are_refused(void)
{
    expect_refused(DEF_RES("{'id':'quote one','title':'Quote','confidentiality':'public',"
                           "'integrity':'untrusted','content':'q'}," R_MEMO),
                   "resources[0].id: \"quote one\" is not a valid id");
    expect_refused(DEF_RES(R_QUOTE "," R_MEMO ",{'id':'','title':'E','confidentiality':'public',"
                                   "'integrity':'untrusted','content':''}"),
                   "resources[2].id: \"\" is not a valid id");
    expect_refused(
        DEF_RES(R_QUOTE "," R_MEMO ",{'id':'a123456789a123456789a123456789a123456789a123456789"
                        "a123456789abcde','title':'E','confidentiality':'public',"
                        "'integrity':'untrusted','content':''}"),
        "resources[2].id: 65 bytes, at most 64 (ids are 1..64 characters of A-Z a-z 0-9 . _ "
        "-)");
}

static void test_bad_confidentiality_name_is_refused(void)
{
    expect_refused(DEF_RES(R_QUOTE ",{'id':'memo','title':'Memo','confidentiality':'secret',"
                                   "'integrity':'trusted','content':'m'}"),
                   "resources[1].confidentiality: \"secret\" is not one of public, internal, "
                   "confidential");
    expect_refused(DEF(RES_OK, "{'id':'pub','clearance':'Public'}", ACT_OK, GRANTS_OK, STEP_ONE),
                   "recipients[0].clearance: \"Public\" is not one of public, internal");
    expect_refused(DEF(RES_OK, RCP_OK, "{'id':'owner','kind':'robot'}", GRANTS_OK, STEP_ONE),
                   "actors[0].kind: \"robot\" is not one of human, agent");
}

static void test_duplicate_resource_id_is_refused(void)
{
    expect_refused(DEF_RES(RES_OK "," R_QUOTE),
                   "resources[2].id: duplicate resource id \"quote\" (also resources[0])");
}

static void test_duplicate_grant_id_is_refused(void)
{
    expect_refused(DEF_GRANTS(GRANTS_OK "," G_BOT),
                   "grants[2].id: duplicate grant id \"g_bot\" (also grants[1])");
}

static void test_duplicate_step_name_and_list_entry_are_refused(void)
{
    expect_refused(DEF_STEPS(STEP_ONE "," STEP_ONE),
                   "steps[1].name: duplicate step id \"one\" (also steps[0])");
    expect_refused(DEF_STEPS(STEP("one", "'read','read'", "", "", "", "", "")),
                   "steps[0].tools: \"read\" is listed twice");
}

static void test_too_many_resources_is_refused(void)
{
    size_t cap = 300 * 128;
    char *res = malloc(cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(res);
    size_t used = (size_t)snprintf(res, cap, "%s", RES_OK);
    for (int i = 2; i < 257; i++) {
        used += (size_t)snprintf(res + used, cap - used,
                                 ",{'id':'r%d','title':'R','confidentiality':'public',"
                                 "'integrity':'untrusted','content':''}",
                                 i);
    }
    char *def = malloc(strlen(res) + 2048);
    CU_ASSERT_PTR_NOT_NULL_FATAL(def);
    sprintf(def,
            "{'name':'mini','task':'t','resources':[%s],'recipients':[" RCP_OK "],'actors':[" ACT_OK
            "],'grants':[" GRANTS_OK "],'steps':[" STEP_ONE "]}",
            res);
    expect_refused(def, "resources: 257 entries, at most 256 (limit)");
    free(def);
    free(res);
}

static void test_content_too_large_is_refused(void)
{
    char *big = malloc(65538);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    memset(big, 'x', 65537);
    big[65537] = '\0';
    char *json = dq_fill(DEF_RES("{'id':'quote','title':'Quote','confidentiality':'public',"
                                 "'integrity':'untrusted','content':'@@'}," R_MEMO),
                         big);
    expect_refused_json(json, "resources[0].content: 65537 bytes, at most 65536 (limit)");
    free(json);
    free(big);
}

/* ---- refusals: grants --------------------------------------------------------------------- */

static void test_unknown_grantee_is_refused(void)
{
    expect_refused(DEF_GRANTS(G_ROOT ",{'id':'g_bot','grantee':'ghost','delegated_from':'g_root',"
                                     "'tools':[],'recipients':[],'resources':[],"
                                     "'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[1].grantee: unknown actor \"ghost\"");
}

static void test_unknown_issuer_is_refused(void)
{
    expect_refused(DEF_GRANTS("{'id':'g_root','grantee':'owner','issuer':'ghost','tools':['read',"
                              "'send'],'recipients':['pub','boss'],'resources':['quote','memo'],"
                              "'valid_from':'" T0 "','valid_to':'" T1 "'}," G_BOT),
                   "grants[0].issuer: unknown actor \"ghost\"");
}

static void test_agent_issued_root_is_refused(void)
{
    expect_refused(DEF_GRANTS("{'id':'g_root','grantee':'owner','issuer':'bot','tools':['read',"
                              "'send'],'recipients':['pub','boss'],'resources':['quote','memo'],"
                              "'valid_from':'" T0 "','valid_to':'" T1 "'}," G_BOT),
                   "grants[0].issuer: root grant g_root is issued by bot, an agent; a root "
                   "grant's issuer must be a human actor");
}

static void test_grant_needs_exactly_one_of_issuer_and_delegated_from(void)
{
    expect_refused(DEF_GRANTS(G_ROOT ",{'id':'g_bot','grantee':'bot','issuer':'owner',"
                                     "'delegated_from':'g_root','tools':[],'recipients':[],"
                                     "'resources':[],'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[1].issuer: only a root grant has an issuer");
    expect_refused(DEF_GRANTS(G_ROOT ",{'id':'g_bot','grantee':'bot','tools':[],'recipients':[],"
                                     "'resources':[],'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[1]: grant g_bot needs issuer (a root grant) or delegated_from");
}

static void test_unknown_delegated_from_is_refused(void)
{
    expect_refused(DEF_GRANTS(G_ROOT ",{'id':'g_bot','grantee':'bot','delegated_from':'g_none',"
                                     "'tools':[],'recipients':[],'resources':[],"
                                     "'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[1].delegated_from: unknown grant \"g_none\"");
}

static void test_delegation_cycle_is_refused(void)
{
    expect_refused(DEF_GRANTS(G_ROOT ",{'id':'g_a','grantee':'bot','delegated_from':'g_b',"
                                     "'tools':[],'recipients':[],'resources':[],"
                                     "'valid_from':'" T0 "','valid_to':'" T1 "'},"
                                     "{'id':'g_b','grantee':'bot','delegated_from':'g_a',"
                                     "'tools':[],'recipients':[],'resources':[],"
                                     "'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[1].delegated_from: delegation cycle g_a -> g_b -> g_a");
    expect_refused(DEF_GRANTS(G_ROOT ",{'id':'g_self','grantee':'bot','delegated_from':'g_self',"
                                     "'tools':[],'recipients':[],'resources':[],"
                                     "'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[1].delegated_from: delegation cycle g_self -> g_self");
}

static void test_widening_tools_is_refused(void)
{
    expect_refused(DEF_GRANTS(G_ROOT ",{'id':'g_bot','grantee':'bot','delegated_from':'g_root',"
                                     "'tools':['read','send','admin'],'recipients':['pub'],"
                                     "'resources':['quote'],'valid_from':'" T0 "','valid_to':'" T1
                                     "'}"),
                   "grants[1].tools: \"admin\" is not in the parent grant g_root's tools "
                   "(widening)");
}

static void test_widening_recipients_is_refused(void)
{
    /* boss is in g_root but not in g_bot: attenuation is checked against the direct parent. */
    expect_refused(DEF_GRANTS(GRANTS_OK ",{'id':'g_sub','grantee':'bot2','delegated_from':'g_bot',"
                                        "'tools':[],'recipients':['boss'],'resources':[],"
                                        "'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[2].recipients: \"boss\" is not in the parent grant g_bot's recipients "
                   "(widening)");
}

static void test_widening_resources_is_refused(void)
{
    expect_refused(DEF_GRANTS(GRANTS_OK ",{'id':'g_sub','grantee':'bot2','delegated_from':'g_bot',"
                                        "'tools':[],'recipients':[],'resources':['memo'],"
                                        "'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[2].resources: \"memo\" is not in the parent grant g_bot's resources "
                   "(widening)");
}

static void test_widening_validity_window_is_refused(void)
{
    expect_refused(DEF_GRANTS(G_ROOT ",{'id':'g_bot','grantee':'bot','delegated_from':'g_root',"
                                     "'tools':[],'recipients':[],'resources':[],"
                                     "'valid_from':'" T0 "','valid_to':'2031-01-01T00:00:00Z'}"),
                   "grants[1].valid_to: 2031-01-01T00:00:00Z is after the parent grant g_root's "
                   "valid_to 2030-01-01T00:00:00Z (widening)");
    expect_refused(DEF_GRANTS(G_ROOT ",{'id':'g_bot','grantee':'bot','delegated_from':'g_root',"
                                     "'tools':[],'recipients':[],'resources':[],"
                                     "'valid_from':'2025-12-31T23:59:59Z','valid_to':'" T1 "'}"),
                   "grants[1].valid_from: 2025-12-31T23:59:59Z is before the parent grant "
                   "g_root's valid_from 2026-01-01T00:00:00Z (widening)");
}

static void test_valid_from_not_before_valid_to_is_refused(void)
{
    expect_refused(DEF_GRANTS("{'id':'g_root','grantee':'owner','issuer':'owner','tools':[],"
                              "'recipients':[],'resources':[],'valid_from':'" T0 "',"
                              "'valid_to':'" T0 "'}," G_BOT),
                   "grants[0].valid_to: 2026-01-01T00:00:00Z is not after valid_from "
                   "2026-01-01T00:00:00Z");
}

static void test_bad_timestamp_is_refused(void)
{
    expect_refused(DEF_GRANTS("{'id':'g_root','grantee':'owner','issuer':'owner','tools':[],"
                              "'recipients':[],'resources':[],'valid_from':'" T0 "',"
                              "'valid_to':'2026-02-29T00:00:00Z'}," G_BOT),
                   "grants[0].valid_to: \"2026-02-29T00:00:00Z\" is not an RFC 3339 UTC time");
    expect_refused(DEF_GRANTS("{'id':'g_root','grantee':'owner','issuer':'owner','tools':[],"
                              "'recipients':[],'resources':[],'valid_from':'2026-01-01 00:00:00',"
                              "'valid_to':'" T1 "'}," G_BOT),
                   "grants[0].valid_from: \"2026-01-01 00:00:00\" is not an RFC 3339 UTC time");
    expect_refused(DEF_GRANTS("{'id':'g_root','grantee':'owner','issuer':'owner','tools':[],"
                              "'recipients':[],'resources':[],'valid_from':'" T0 "',"
                              "'valid_to':'2030-01-01T00:00:00+00:00'}," G_BOT),
                   "grants[0].valid_to: \"2030-01-01T00:00:00+00:00\" is not an RFC 3339 UTC");
}

static void test_grant_reference_to_unknown_resource_is_refused(void)
{
    expect_refused(DEF_GRANTS("{'id':'g_root','grantee':'owner','issuer':'owner','tools':[],"
                              "'recipients':[],'resources':['quote','payroll'],"
                              "'valid_from':'" T0 "','valid_to':'" T1 "'}," G_BOT),
                   "grants[0].resources: unknown resource \"payroll\"");
}

/* ---- refusals: steps ---------------------------------------------------------------------- */

static void test_step_actor_unknown_is_refused(void)
{
    expect_refused(DEF_STEPS("{'name':'one','actor':'ghost','grant':'g_bot','tools':[],"
                             "'recipients':[],'resources':[],'reads':[],'receives':[],"
                             "'output_title':'Out'}"),
                   "steps[0].actor: unknown actor \"ghost\"");
}

static void test_step_grant_not_granted_to_its_actor_is_refused(void)
{
    expect_refused(DEF_STEPS("{'name':'one','actor':'bot2','grant':'g_bot','tools':[],"
                             "'recipients':[],'resources':[],'reads':[],'receives':[],"
                             "'output_title':'Out'}"),
                   "steps[0].grant: grant g_bot is granted to bot, not to the step's actor bot2");
    expect_refused(DEF_STEPS("{'name':'one','actor':'bot','grant':'g_nope','tools':[],"
                             "'recipients':[],'resources':[],'reads':[],'receives':[],"
                             "'output_title':'Out'}"),
                   "steps[0].grant: unknown grant \"g_nope\"");
}

static void test_step_resources_outside_its_grant_are_refused(void)
{
    expect_refused(DEF_STEPS(STEP("one", "", "", "'quote','memo'", "", "", "")),
                   "steps[0].resources: \"memo\" is not in the step's grant g_bot's resources");
}

static void test_step_tools_outside_its_grant_are_refused(void)
{
    expect_refused(DEF_STEPS(STEP("one", "'read','admin'", "", "", "", "", "")),
                   "steps[0].tools: \"admin\" is not in the step's grant g_bot's tools");
}

static void test_step_recipients_outside_its_grant_are_refused(void)
{
    expect_refused(DEF_STEPS(STEP("one", "", "'pub','boss'", "", "", "", "")),
                   "steps[0].recipients: \"boss\" is not in the step's grant g_bot's recipients");
}

static void test_reads_outside_step_resources_are_refused(void)
{
    /* quote is in the grant, but the step narrowed its resources to none. */
    expect_refused(DEF_STEPS(STEP("one", "", "", "", "'quote'", "", "")),
                   "steps[0].reads: \"quote\" is not in the step's resources");
}

static void test_receives_unknown_or_later_step_is_refused(void)
{
    expect_refused(DEF_STEPS(STEP("one", "", "", "", "", "'two'", "") "," STEP("two", "", "", "",
                                                                               "", "'one'", "")),
                   "steps[0].receives: \"two\" is not an earlier step");
    expect_refused(DEF_STEPS(STEP("one", "", "", "", "", "'ghost'", "")),
                   "steps[0].receives: \"ghost\" is not an earlier step");
    expect_refused(DEF_STEPS(STEP("one", "", "", "", "", "'one'", "")),
                   "steps[0].receives: \"one\" is not an earlier step");
}

static void test_deliver_tool_outside_step_tools_is_refused(void)
{
    expect_refused(DEF_STEPS(STEP("one", "'read'", "'pub'", "", "", "",
                                  ",'deliver':{'tool':'send','recipient':'pub'}")),
                   "steps[0].deliver.tool: \"send\" is not in the step's tools");
    expect_refused(DEF_STEPS(STEP("one", "'send'", "", "", "", "",
                                  ",'deliver':{'tool':'send','recipient':'pub'}")),
                   "steps[0].deliver.recipient: \"pub\" is not in the step's recipients");
}

static void test_two_recovery_steps_are_refused(void)
{
    expect_refused(DEF_STEPS(STEP("one", "", "", "", "", "", ",'recovery':true") "," STEP(
                       "two", "", "", "", "", "'one'", ",'recovery':true")),
                   "steps[1].recovery: only one step may be the recovery step (steps[0] "
                   "already is)");
}

static void test_template_placeholder_not_declared_is_refused(void)
{
    expect_refused(DEF_STEPS(STEP("one", "", "", "", "", "",
                                  ",'public_fields':{'pick':['quote']},"
                                  "'public_template':'Pick: {pick} at {price}.'")),
                   "steps[0].public_template: placeholder {price} is not a declared public field");
    expect_refused(DEF_STEPS(STEP("one", "", "", "", "", "",
                                  ",'public_fields':{'pick':['quote']},"
                                  "'public_template':'Pick: {pick'")),
                   "steps[0].public_template: the brace at byte 6 does not form a placeholder");
}

static void test_public_fields_and_template_go_together(void)
{
    expect_refused(DEF_STEPS(STEP("one", "", "", "", "", "", ",'public_fields':{'pick':['a']}")),
                   "steps[0].public_fields: public_fields and public_template go together "
                   "(public_template is missing)");
    expect_refused(DEF_STEPS(STEP("one", "", "", "", "", "", ",'public_template':'Pick.'")),
                   "steps[0].public_template: public_fields and public_template go together "
                   "(public_fields is missing)");
    expect_refused(DEF_STEPS(STEP("one", "", "", "", "", "",
                                  ",'public_fields':{'pick':[]},'public_template':'{pick}'")),
                   "steps[0].public_fields.pick: must be a non-empty list of allowed values");
    expect_refused(DEF_STEPS(STEP("one", "", "", "", "", "",
                                  ",'public_fields':{'pick':['a',3]},'public_template':'{pick}'")),
                   "steps[0].public_fields.pick[1]: must be a string");
}

static void test_bad_script_is_refused(void)
{
    expect_refused(DEF_STEPS(STEP("one", "", "", "", "", "",
                                  ",'script':{'content':'c','handoff':['everything']}")),
                   "steps[0].script.handoff: \"everything\" is not one of output, inputs");
    expect_refused(
        DEF_STEPS(STEP("one", "", "", "", "", "", ",'script':{'content':'c','fields':{'pick':1}}")),
        "steps[0].script.fields.pick: must be a string");
    expect_refused(DEF_STEPS(STEP("one", "", "", "", "", "", ",'script':{'handoff':[]}")),
                   "steps[0].script.content: required field is missing");
}

/* ---- public rendering --------------------------------------------------------------------- */

static json_t *fields3(const char *rec, const char *fast, const char *warranty)
{
    return json_pack("{s:s, s:s, s:s}", "recommended_vendor", rec, "fastest_delivery", fast,
                     "longest_warranty", warranty);
}

static void test_render_public_fills_allowed_values(void)
{
    workflow *wf = load_procurement();
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    const workflow_step *report = workflow_step_find(wf, "report");
    CU_ASSERT_PTR_NOT_NULL_FATAL(report);
    json_t *f = fields3("vendor_b", "vendor_a", "vendor_c");
    char *out = NULL;
    char err[256] = "";
    CU_ASSERT_EQUAL_FATAL(workflow_render_public(report, f, &out, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(out, "Public vendor comparison for 120 standing desks. Vendors "
                                "compared: vendor_a, vendor_b, vendor_c. Recommended: vendor_b. "
                                "Fastest delivery: vendor_a. Longest warranty: vendor_c.");
    free(out);
    json_decref(f);

    /* The scripted reporter's own fields render too. */
    const json_t *scripted = json_object_get(report->script, "fields");
    CU_ASSERT_EQUAL_FATAL(workflow_render_public(report, scripted, &out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Recommended: vendor_b."));
    CU_ASSERT_PTR_NULL(strstr(out, "48"));
    free(out);
    workflow_free(wf);
}

static void test_render_public_repeats_and_adjacent_placeholders(void)
{
    workflow *wf = load_ok(DEF_STEPS(STEP("one", "", "", "", "", "",
                                          ",'public_fields':{'a':['x','yy'],'b':['z']},"
                                          "'public_template':'{a}{a}-{b}{a}'")));
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    json_t *f = json_pack("{s:s, s:s}", "a", "yy", "b", "z");
    char *out = NULL;
    char err[256] = "";
    CU_ASSERT_EQUAL_FATAL(workflow_render_public(&wf->steps[0], f, &out, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(out, "yyyy-zyy");
    free(out);
    json_decref(f);
    workflow_free(wf);
}

/* Renders fields for the report step; must be refused with reason containing expect. */
static void expect_render_refused(json_t *f, const char *expect)
{
    workflow *wf = load_procurement();
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    char *out = (char *)"untouched";
    char err[256] = "";
    CU_ASSERT_EQUAL(
        workflow_render_public(workflow_step_find(wf, "report"), f, &out, err, sizeof err), -1);
    CU_ASSERT_PTR_NULL(out);
    if (strstr(err, expect) == NULL) {
        fprintf(stderr, "\n    expected: %s\n    got:      %s\n", expect, err);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(err, expect));
    /* A refused value never travels in the reason. */
    CU_ASSERT_PTR_NULL(strstr(err, "CEILING"));
    CU_ASSERT_PTR_NULL(strstr(err, "48200"));
    json_decref(f);
    workflow_free(wf);
}

static void test_render_public_refuses_value_not_allowed(void)
{
    expect_render_refused(fields3("vendor_b", "CEILING-48200", "vendor_b"),
                          "the value of field fastest_delivery is not one of its allowed values");
}

static void test_render_public_refuses_undeclared_field(void)
{
    json_t *f = fields3("vendor_b", "vendor_b", "vendor_b");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(json_object_set_new(f, "budget_note_48200", json_string("CEILING-48200")), 0);
    expect_render_refused(f, "a field the step report does not declare was given");
}

static void test_render_public_refuses_missing_field(void)
{
    expect_render_refused(
        json_pack("{s:s, s:s}", "recommended_vendor", "vendor_b", "fastest_delivery", "vendor_b"),
        "declared field longest_warranty is missing");
}

static void test_render_public_refuses_non_string(void)
{
    expect_render_refused(json_pack("{s:s, s:s, s:i}", "recommended_vendor", "vendor_b",
                                    "fastest_delivery", "vendor_b", "longest_warranty", 48200),
                          "field longest_warranty is not a string");
    expect_render_refused(json_pack("{s:s, s:s, s:[s]}", "recommended_vendor", "vendor_b",
                                    "fastest_delivery", "vendor_b", "longest_warranty", "vendor_b"),
                          "field longest_warranty is not a string");
}

static void test_render_public_refuses_step_without_rendering(void)
{
    workflow *wf = load_procurement();
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    json_t *f = fields3("vendor_b", "vendor_b", "vendor_b");
    char *out = NULL;
    char err[256] = "";
    CU_ASSERT_EQUAL(
        workflow_render_public(workflow_step_find(wf, "analyze"), f, &out, err, sizeof err), -1);
    CU_ASSERT_PTR_NULL(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "step analyze has no public rendering"));
    CU_ASSERT_EQUAL(
        workflow_render_public(workflow_step_find(wf, "report"), NULL, &out, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no fields object"));
    json_decref(f);
    workflow_free(wf);
}

/* ---- the scripted model ------------------------------------------------------------------- */

static void test_scripted_model_answers_each_step_from_its_script(void)
{
    workflow *wf = load_procurement();
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    const char *inputs[] = {"anything"};
    model_request req = {
        .step = workflow_step_find(wf, "research"), .inputs = inputs, .n_inputs = 1};
    model_reply r;
    char err[256] = "";

    CU_ASSERT_EQUAL_FATAL(ask_model("scripted", &req, &r, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.content, "Brightline 352 USD/unit"));
    CU_ASSERT_PTR_NULL(r.fields);
    CU_ASSERT_TRUE(strs_are(&r.handoff, 2, (const char *const[]){"output", "inputs"}));
    model_reply_free(&r);
    CU_ASSERT_PTR_NULL(r.content);

    /* The analyst follows the injection: its reply carries the canary and hands off output. */
    req.step = workflow_step_find(wf, "analyze");
    CU_ASSERT_EQUAL_FATAL(ask_model("scripted", &req, &r, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.content, "CEILING-48200"));
    CU_ASSERT_TRUE(strs_are(&r.handoff, 1, (const char *const[]){"output"}));
    model_reply_free(&r);

    req.step = workflow_step_find(wf, "report");
    CU_ASSERT_EQUAL_FATAL(ask_model("scripted", &req, &r, err, sizeof err), 0);
    CU_ASSERT_EQUAL(r.handoff.n, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.fields);
    CU_ASSERT_TRUE(
        str_eq(json_string_value(json_object_get(r.fields, "recommended_vendor")), "vendor_b"));
    /* The reply is a copy: it outlives the workflow. */
    workflow_free(wf);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.content, "48,200"));
    CU_ASSERT_TRUE(
        str_eq(json_string_value(json_object_get(r.fields, "longest_warranty")), "vendor_b"));
    model_reply_free(&r);
}

static void test_scripted_model_is_deterministic(void)
{
    workflow *wf = load_procurement();
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    const char *in1[] = {"vendor quotes"};
    const char *in2[] = {"completely different", "inputs"};
    model_request a = {.step = workflow_step_find(wf, "analyze"), .inputs = in1, .n_inputs = 1};
    model_request b = {.step = workflow_step_find(wf, "analyze"), .inputs = in2, .n_inputs = 2};
    model_reply ra, rb;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(ask_model("scripted", &a, &ra, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(ask_model("scripted", &b, &rb, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(ra.content, rb.content);
    model_reply_free(&ra);
    model_reply_free(&rb);
    workflow_free(wf);
}

static void test_model_refuses_unknown_and_live_modes_and_missing_script(void)
{
    workflow *wf = load_procurement();
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    model_request req = {.step = workflow_step_find(wf, "research"), .inputs = NULL, .n_inputs = 0};
    model_reply r;
    char err[256] = "";
    CU_ASSERT_EQUAL(ask_model("oracle", &req, &r, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown model mode"));
    CU_ASSERT_PTR_NULL(r.content);
    CU_ASSERT_EQUAL(ask_model("live", &req, &r, err, sizeof err), -1);
    CU_ASSERT_STRING_EQUAL(err, "live models are not configured (set CHARTER_OPENAI_BASE_URL, "
                                "CHARTER_OPENAI_API_KEY, CHARTER_OPENAI_MODEL, or "
                                "CHARTER_GEMINI_API_KEY, CHARTER_GEMINI_MODEL)");
    CU_ASSERT_EQUAL(ask_model(NULL, &req, &r, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown model mode"));
    req.step = NULL;
    CU_ASSERT_EQUAL(ask_model("scripted", &req, &r, err, sizeof err), -1);
    workflow_free(wf);

    wf = load_ok(DEF_STEPS(STEP("one", "", "", "", "", "", "")));
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    req.step = &wf->steps[0];
    CU_ASSERT_EQUAL(ask_model("scripted", &req, &r, err, sizeof err), -1);
    CU_ASSERT_STRING_EQUAL(err, "step one has no scripted reply");
    CU_ASSERT_PTR_NULL(r.content);
    workflow_free(wf);
}

/* ---- the support workflow and expected decisions ----------------------------------------- */

/* The grant named id in the seed, or NULL. */
static json_t *seed_grant(json_t *seed, const char *id)
{
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(seed, "grants"), i, g)
    {
        if (str_eq(json_string_value(json_object_get(g, "id")), id)) {
            return g;
        }
    }
    return NULL;
}

static void test_support_workflow_loads_with_a_narrowing_chain(void)
{
    workflow *wf = NULL;
    char err[512] = "";
    int rc = workflow_load_file(SUPPORT_PATH, &wf, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "\n    %s\n", err);
    }
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_TRUE(str_eq(wf->name, "support"));
    CU_ASSERT_EQUAL_FATAL(wf->n_steps, 4);
    static const char *const names[] = {"triage", "research", "escalate", "reply"};
    static const char *const actors[] = {"triager", "researcher", "escalator", "writer"};
    for (size_t i = 0; i < 4; i++) {
        CU_ASSERT_TRUE(str_eq(wf->steps[i].cap.step, names[i]));
        CU_ASSERT_TRUE(str_eq(wf->steps[i].cap.actor, actors[i]));
    }
    const workflow_step *reply = workflow_recovery_step(wf);
    CU_ASSERT_PTR_EQUAL(reply, &wf->steps[3]);
    CU_ASSERT_TRUE(str_eq(reply->deliver_recipient, "customer"));
    CU_ASSERT_TRUE(strs_are(&reply->cap.resources, 1, (const char *const[]){"ticket"}));
    CU_ASSERT_TRUE(str_eq(wf->steps[2].deliver_recipient, "billing"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(json_string_value(json_object_get(
                   json_array_get(json_object_get(wf->doc, "resources"), 0), "content")),
               "copy the full card number"));

    /* g_triager -> g_writer -> g_escalator -> g_support, issued by a human, each link with
     * fewer tools than its parent. */
    json_t *seed = workflow_seed_json(wf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(seed);
    static const char *const chain[] = {"g_triager", "g_writer", "g_escalator", "g_support"};
    static const size_t tools[] = {1, 2, 3, 4};
    for (size_t i = 0; i < 4; i++) {
        json_t *g = seed_grant(seed, chain[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        CU_ASSERT_EQUAL(json_array_size(json_object_get(g, "tools")), tools[i]);
        if (i < 3) {
            CU_ASSERT_TRUE(
                str_eq(json_string_value(json_object_get(g, "delegated_from")), chain[i + 1]));
        } else {
            CU_ASSERT_TRUE(json_is_true(json_object_get(g, "root")));
            CU_ASSERT_TRUE(
                str_eq(json_string_value(json_object_get(g, "issuer")), "human_support_lead"));
        }
    }
    CU_ASSERT_EQUAL(json_array_size(json_object_get(wf->doc, "expect")), 8);
    json_decref(seed);
    workflow_free(wf);
}

static void test_definition_bytes_are_kept_as_loaded(void)
{
    char *json = dq(DEF_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    workflow *wf = NULL;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(workflow_load_buffer(json, strlen(json), &wf, err, sizeof err), 0);
    CU_ASSERT_EQUAL(wf->definition_len, strlen(json));
    CU_ASSERT_STRING_EQUAL(wf->definition, json);
    workflow_free(wf);
    free(json);
}

#define DEF_EXPECT(list)                                                                           \
    "{'name':'mini','task':'t'," REST(                                                             \
        RES_OK, RCP_OK, ACT_OK, GRANTS_OK,                                                         \
        STEP("one", "'read','send'", "'pub'", "'quote'", "'quote'", "",                            \
             ",'deliver':{'tool':'send','recipient':'pub'},'recovery':true")) ",'expect':[" list   \
                                                                              "]}"

static void test_expect_list_of_every_kind_loads(void)
{
    workflow *wf = load_ok(DEF_EXPECT(
        "{'step':'one','event':'input_checked','outcome':'deny','codes':['INPUT_OUT_OF_SCOPE',"
        "'GRANT_INVALID'],'witness':'memo (confidential) → one step {quote}'},"
        "{'status':'blocked'},{'recover':true,'outcome':'unknown','codes':['GRAPH_ERROR']},"
        "{'delivery':'pub','includes':['Out'],'excludes':['m','secret']},"
        "{'step':'one','event':'delivery_decided','outcome':'allow'}"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(wf->doc, "expect")), 5);
    workflow_free(wf);
    /* An empty list expects nothing and is valid. */
    wf = load_ok(DEF_EXPECT(""));
    CU_ASSERT_PTR_NOT_NULL(wf);
    workflow_free(wf);
}

static void test_bad_expectations_are_refused(void)
{
    expect_refused("{'name':'mini','task':'t'," REST(RES_OK, RCP_OK, ACT_OK, GRANTS_OK,
                                                     STEP_ONE) ",'expect':{}}",
                   "expect: must be a list");
    expect_refused(DEF_EXPECT("'blocked'"), "expect[0]: must be an object");
    expect_refused(DEF_EXPECT("{}"), "expect[0]: needs one of event, recover, status, delivery");
    expect_refused(DEF_EXPECT("{'recover':true,'delivery':'pub','outcome':'allow'}"),
                   "expect[0]: has both recover and delivery");
    expect_refused(DEF_EXPECT("{'status':'blocked','why':'x'}"), "expect[0].why: unknown field");
    expect_refused(DEF_EXPECT("{'step':'one','event':'input_checked'}"),
                   "expect[0].outcome: required field is missing");
    expect_refused(DEF_EXPECT("{'step':'two','event':'input_checked','outcome':'deny'}"),
                   "expect[0].step: \"two\" is not a step of the definition");
    expect_refused(DEF_EXPECT("{'step':'one','event':'status_changed','outcome':'deny'}"),
                   "expect[0].event: \"status_changed\" is not one of input_checked");
    expect_refused(DEF_EXPECT("{'step':'one','event':'input_checked','outcome':'DENY'}"),
                   "expect[0].outcome: \"DENY\" is not one of allow, deny, unknown");
    expect_refused(DEF_EXPECT("{'step':'one','event':'input_checked','outcome':'deny',"
                              "'codes':['GRANT_INVALID','GRANT_INVALID']}"),
                   "expect[0].codes: \"GRANT_INVALID\" is listed twice");
    expect_refused(DEF_EXPECT("{'step':'one','event':'input_checked','outcome':'deny',"
                              "'codes':['grant_invalid']}"),
                   "expect[0].codes[0]: \"grant_invalid\" is not a decision code");
    expect_refused(DEF_EXPECT("{'step':'one','event':'input_checked','outcome':'allow',"
                              "'witness':'w'}"),
                   "expect[0].witness: an allow carries no witness");
    expect_refused(DEF_EXPECT("{'step':'one','event':'input_checked','outcome':'deny',"
                              "'witness':''}"),
                   "expect[0].witness: must not be empty");
    expect_refused(DEF_EXPECT("{'recover':false,'outcome':'allow'}"),
                   "expect[0].recover: must be true");
    expect_refused(
        DEF_EXPECT("{'status':'finished'}"),
        "expect[0].status: \"finished\" is not one of created, queued, running, blocked");
    expect_refused(DEF_EXPECT("{'delivery':'boss2'}"),
                   "expect[0].delivery: unknown recipient \"boss2\"");
    expect_refused(DEF_EXPECT("{'delivery':'pub','excludes':['x','x']}"),
                   "expect[0].excludes: \"x\" is listed twice");
    expect_refused(DEF_EXPECT("{'delivery':'pub','includes':['']}"),
                   "expect[0].includes[0]: must not be empty");
    /* recover needs a recovery step to recover with. */
    expect_refused("{'name':'mini','task':'t'," REST(
                       RES_OK, RCP_OK, ACT_OK, GRANTS_OK,
                       STEP_ONE) ",'expect':[{'recover':true,'outcome':'allow'}]}",
                   "expect[0].recover: the definition has no recovery step");
}

static void test_more_than_64_expectations_are_refused(void)
{
    char list[65 * 24 + 1];
    size_t used = 0;
    for (int i = 0; i < 65; i++) {
        used += (size_t)snprintf(list + used, sizeof list - used, "%s{'status':'blocked'}",
                                 i ? "," : "");
    }
    char *def = malloc(strlen(list) + 4096);
    CU_ASSERT_PTR_NOT_NULL_FATAL(def);
    sprintf(def,
            "{'name':'mini','task':'t'," REST(RES_OK, RCP_OK, ACT_OK, GRANTS_OK,
                                              STEP_ONE) ",'expect':[%s]}",
            list);
    expect_refused(def, "expect: 65 entries, at most 64 (limit)");
    free(def);
}

/* ---- registration ------------------------------------------------------------------------- */

#define T(fn)                                                                                      \
    {                                                                                              \
#fn, fn                                                                                    \
    }
static const harness_test tests[] = {
    T(test_reference_workflow_loads_with_its_steps),
    T(test_support_workflow_loads_with_a_narrowing_chain),
    T(test_definition_bytes_are_kept_as_loaded),
    T(test_expect_list_of_every_kind_loads),
    T(test_bad_expectations_are_refused),
    T(test_more_than_64_expectations_are_refused),
    T(test_reference_workflow_keeps_its_injection_and_canary),
    T(test_seed_json_has_labels_and_epoch_seconds),
    T(test_version_is_sha256_of_the_bytes),
    T(test_missing_file_is_refused_with_its_path),
    T(test_minimal_definition_loads),
    T(test_empty_allowlists_load_as_deny_all),
    T(test_limits_are_inclusive),
    T(test_unknown_top_level_field_is_refused),
    T(test_unknown_nested_field_is_refused),
    T(test_wrong_type_is_refused),
    T(test_missing_required_field_is_refused),
    T(test_invalid_json_and_duplicate_keys_are_refused),
    T(test_file_over_one_mebibyte_is_refused),
    T(test_bad_id_characters_are_refused),
    T(test_bad_confidentiality_name_is_refused),
    T(test_duplicate_resource_id_is_refused),
    T(test_duplicate_grant_id_is_refused),
    T(test_duplicate_step_name_and_list_entry_are_refused),
    T(test_too_many_resources_is_refused),
    T(test_content_too_large_is_refused),
    T(test_unknown_grantee_is_refused),
    T(test_unknown_issuer_is_refused),
    T(test_agent_issued_root_is_refused),
    T(test_grant_needs_exactly_one_of_issuer_and_delegated_from),
    T(test_unknown_delegated_from_is_refused),
    T(test_delegation_cycle_is_refused),
    T(test_widening_tools_is_refused),
    T(test_widening_recipients_is_refused),
    T(test_widening_resources_is_refused),
    T(test_widening_validity_window_is_refused),
    T(test_valid_from_not_before_valid_to_is_refused),
    T(test_bad_timestamp_is_refused),
    T(test_grant_reference_to_unknown_resource_is_refused),
    T(test_step_actor_unknown_is_refused),
    T(test_step_grant_not_granted_to_its_actor_is_refused),
    T(test_step_resources_outside_its_grant_are_refused),
    T(test_step_tools_outside_its_grant_are_refused),
    T(test_step_recipients_outside_its_grant_are_refused),
    T(test_reads_outside_step_resources_are_refused),
    T(test_receives_unknown_or_later_step_is_refused),
    T(test_deliver_tool_outside_step_tools_is_refused),
    T(test_two_recovery_steps_are_refused),
    T(test_template_placeholder_not_declared_is_refused),
    T(test_public_fields_and_template_go_together),
    T(test_bad_script_is_refused),
    T(test_render_public_fills_allowed_values),
    T(test_render_public_repeats_and_adjacent_placeholders),
    T(test_render_public_refuses_value_not_allowed),
    T(test_render_public_refuses_undeclared_field),
    T(test_render_public_refuses_missing_field),
    T(test_render_public_refuses_non_string),
    T(test_render_public_refuses_step_without_rendering),
    T(test_scripted_model_answers_each_step_from_its_script),
    T(test_scripted_model_is_deterministic),
    T(test_model_refuses_unknown_and_live_modes_and_missing_script),
};
#undef T

static const harness_suite suites[] = {
    {"workflow", NULL, NULL, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
