/*
 * test_workflows_api.c - workflows as data, through the API of a real charterd on the test
 * Redis: ApplyWorkflow refuses every bad definition with a message naming the field and the
 * rule and writes nothing; applying twice is a no-op; a run pins its version; OpenStep narrows
 * and never widens; a scripted reply cannot choose where a step sends; and the support
 * workflow runs end to end.
 *
 * Definitions are written by hand with ' for " (swapped before sending). Their ids start with
 * m_, p_, q_, s_ or w_ so they never meet the reference workflow's, except where a test makes
 * them clash on purpose.
 */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"

#ifndef CHARTER_SOURCE_DIR
#error "CHARTER_SOURCE_DIR (the source tree's root) must be defined by the build"
#endif

static char graph[64];
static harness_charterd daemon_;
static charter_client *op;     /* operator */
static charter_client *viewer; /* viewer */

/* ---- definitions ---------------------------------------------------------------------------- */

#define T0 "2026-01-01T00:00:00Z"
#define T1 "2030-01-01T00:00:00Z"
#define M_RES                                                                                      \
    "{'id':'m_quote','title':'Quote','confidentiality':'public','integrity':'untrusted',"          \
    "'content':'q'},{'id':'m_memo','title':'Memo','confidentiality':'confidential',"               \
    "'integrity':'trusted','content':'m'}"
#define M_RCP "{'id':'m_pub','clearance':'public'},{'id':'m_boss','clearance':'confidential'}"
#define M_ACT                                                                                      \
    "{'id':'m_owner','kind':'human'},{'id':'m_bot','kind':'agent'},{'id':'m_bot2','kind':'agent'}"
#define M_ROOT                                                                                     \
    "{'id':'m_root','grantee':'m_owner','issuer':'m_owner','tools':['read_source','send'],"        \
    "'recipients':['m_pub','m_boss'],'resources':['m_quote','m_memo'],'valid_from':'" T0 "',"      \
    "'valid_to':'" T1 "'}"
#define M_GBOT                                                                                     \
    "{'id':'m_gbot','grantee':'m_bot','delegated_from':'m_root','tools':['read_source','send'],"   \
    "'recipients':['m_pub'],'resources':['m_quote'],'valid_from':'" T0 "','valid_to':'" T1 "'}"
#define M_GRANTS M_ROOT "," M_GBOT
#define M_STEP                                                                                     \
    "{'name':'one','actor':'m_bot','grant':'m_gbot','tools':['read_source','send'],"               \
    "'recipients':['m_pub'],'resources':['m_quote'],'reads':['m_quote'],'receives':[],"            \
    "'output_title':'Out','deliver':{'tool':'send','recipient':'m_pub'},"                          \
    "'script':{'content':'c','handoff':['output']}}"
#define MDEF(res, rcp, act, grants, steps, extra)                                                  \
    "{'name':'mini','task':'Send a quote.','resources':[" res "],'recipients':[" rcp               \
    "],'actors':[" act "],'grants':[" grants "],'steps':[" steps "]" extra "}"
#define M_OK MDEF(M_RES, M_RCP, M_ACT, M_GRANTS, M_STEP, "")
#define M_RESX(res) MDEF(res, M_RCP, M_ACT, M_GRANTS, M_STEP, "")
#define M_GRANTSX(grants) MDEF(M_RES, M_RCP, M_ACT, grants, M_STEP, "")
#define M_STEPSX(steps) MDEF(M_RES, M_RCP, M_ACT, M_GRANTS, steps, "")
#define M_EXPECT(list) MDEF(M_RES, M_RCP, M_ACT, M_GRANTS, M_STEP, ",'expect':[" list "]")
/* A step of m_gbot with the given lists and extra fields (extra starts with ',' or is ""). */
#define M_STEPX(name, tools, rcps, res, reads, receives, extra)                                    \
    "{'name':'" name "','actor':'m_bot','grant':'m_gbot','tools':[" tools "],'recipients':[" rcps  \
    "],'resources':[" res "],'reads':[" reads "],'receives':[" receives                            \
    "],'output_title':'Out'" extra "}"

/* The pinning workflow, version 1: gather reads a public note and a secret and hands its
 * output to publish, whose step admits the note only; recovery publishes from the note. */
#define PIN_V1                                                                                     \
    "{'name':'pin','task':'Publish the note.','resources':["                                       \
    "{'id':'p_note','title':'Note','confidentiality':'public','integrity':'trusted',"              \
    "'content':'The office opens at nine.'},"                                                      \
    "{'id':'p_secret','title':'Secret','confidentiality':'confidential','integrity':'trusted',"    \
    "'content':'Door code 4471.'}],"                                                               \
    "'recipients':[{'id':'p_pub','clearance':'public'}],"                                          \
    "'actors':[{'id':'p_owner','kind':'human'},{'id':'p_a','kind':'agent'},"                       \
    "{'id':'p_b','kind':'agent'}],"                                                                \
    "'grants':[{'id':'p_root','grantee':'p_owner','issuer':'p_owner',"                             \
    "'tools':['read_source','post'],'recipients':['p_pub'],'resources':['p_note','p_secret'],"     \
    "'valid_from':'" T0 "','valid_to':'" T1 "'},"                                                  \
    "{'id':'p_ga','grantee':'p_a','delegated_from':'p_root','tools':['read_source'],"              \
    "'recipients':[],'resources':['p_note','p_secret'],'valid_from':'" T0 "','valid_to':'" T1      \
    "'},"                                                                                          \
    "{'id':'p_gb','grantee':'p_b','delegated_from':'p_root','tools':['read_source','post'],"       \
    "'recipients':['p_pub'],'resources':['p_note'],'valid_from':'" T0 "','valid_to':'" T1 "'}],"   \
    "'steps':[{'name':'gather','actor':'p_a','grant':'p_ga','tools':['read_source'],"              \
    "'recipients':[],'resources':['p_note','p_secret'],'reads':['p_note','p_secret'],"             \
    "'receives':[],'output_title':'Gathered','script':{'content':'Opens at nine; code 4471.',"     \
    "'handoff':['output']}},"                                                                      \
    "{'name':'publish','actor':'p_b','grant':'p_gb','tools':['post'],'recipients':['p_pub'],"      \
    "'resources':['p_note'],'reads':[],'receives':['gather'],'output_title':'Notice',"             \
    "'deliver':{'tool':'post','recipient':'p_pub'},'recovery':true,"                               \
    "'script':{'content':'The office opens at nine.','handoff':[]}}]}"

/* Version 2 of the same name: the same shape with other ids and step names. */
#define PIN_V2                                                                                     \
    "{'name':'pin','task':'Announce the note.','resources':["                                      \
    "{'id':'q_note','title':'Note','confidentiality':'public','integrity':'trusted',"              \
    "'content':'The office opens at ten.'}],"                                                      \
    "'recipients':[{'id':'q_pub','clearance':'public'}],"                                          \
    "'actors':[{'id':'q_owner','kind':'human'},{'id':'q_a','kind':'agent'}],"                      \
    "'grants':[{'id':'q_root','grantee':'q_owner','issuer':'q_owner',"                             \
    "'tools':['read_source','post'],'recipients':['q_pub'],'resources':['q_note'],"                \
    "'valid_from':'" T0 "','valid_to':'" T1 "'},"                                                  \
    "{'id':'q_ga','grantee':'q_a','delegated_from':'q_root','tools':['read_source','post'],"       \
    "'recipients':['q_pub'],'resources':['q_note'],'valid_from':'" T0 "','valid_to':'" T1 "'}],"   \
    "'steps':[{'name':'announce','actor':'q_a','grant':'q_ga','tools':['read_source','post'],"     \
    "'recipients':['q_pub'],'resources':['q_note'],'reads':['q_note'],'receives':[],"              \
    "'output_title':'Announcement','deliver':{'tool':'post','recipient':'q_pub'},"                 \
    "'recovery':true,'script':{'content':'Opens at ten.','handoff':[]}}]}"

/* ---- helpers -------------------------------------------------------------------------------- */

/* A malloc'd copy of s with every ' turned into ". */
static char *dq(const char *s)
{
    char *out = strdup(s);
    for (char *p = out; p && *p; p++)
        if (*p == '\'')
            *p = '"';
    return out;
}

static int open_clients(void)
{
    if (harness_client_open(daemon_.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &op) != 0 ||
        harness_client_open(daemon_.tcp_url, HARNESS_VIEWER_TOKEN, 30000, &viewer) != 0)
        return -1;
    return 0;
}

static int suite_init(void)
{
    harness_graph_name(graph, sizeof graph, "wfapi");
    store *st = harness_store_open(graph);
    store_close(st);
    harness_charterd_opts o = {.graph = graph};
    if (harness_charterd_start(&o, &daemon_) != 0)
        return -1;
    return open_clients();
}

static int suite_clean(void)
{
    charter_client_close(op);
    charter_client_close(viewer);
    int rc = harness_charterd_stop(&daemon_);
    harness_graph_drop(graph);
    return rc == 0 ? 0 : -1;
}

/* ApplyWorkflow of len bytes through client c. */
static int apply_bytes(charter_client *c, const char *bytes, size_t len,
                       Charter__V1__WorkflowInfo **info, charter_status *st)
{
    Charter__V1__ApplyWorkflowRequest req = CHARTER__V1__APPLY_WORKFLOW_REQUEST__INIT;
    req.definition.data = (uint8_t *)bytes;
    req.definition.len = len;
    *info = NULL;
    return charter_apply_workflow(c, &req, info, st);
}

/* Applies def (with ' for "); must succeed. Caller frees the info. */
static Charter__V1__WorkflowInfo *apply_ok(const char *def)
{
    char *json = dq(def);
    Charter__V1__WorkflowInfo *info = NULL;
    charter_status st;
    int rc = json ? apply_bytes(op, json, strlen(json), &info, &st) : -1;
    if (rc != 0)
        fprintf(stderr, "\n    ApplyWorkflow refused: %s: %s\n", charter_status_name(st.code),
                st.message);
    CU_ASSERT_EQUAL(rc, 0);
    free(json);
    return info;
}

static int digest(char hex[65])
{
    return harness_graph_digest(graph, hex);
}

/* json (real quotes) must be refused INVALID_ARGUMENT with a message containing expect, and
 * the graph must be exactly as it was. */
static void expect_refused_bytes(const char *json, size_t len, const char *expect)
{
    char before[65], after[65];
    CU_ASSERT_EQUAL_FATAL(digest(before), 0);
    Charter__V1__WorkflowInfo *info = NULL;
    charter_status st;
    memset(&st, 0, sizeof st);
    int rc = apply_bytes(op, json, len, &info, &st);
    CU_ASSERT_EQUAL(rc, -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(info);
    if (strstr(st.message, expect) == NULL)
        fprintf(stderr, "\n    expected: %s\n    got:      %s: %s\n", expect,
                charter_status_name(st.code), st.message);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, expect));
    CU_ASSERT_EQUAL_FATAL(digest(after), 0);
    CU_ASSERT_STRING_EQUAL(after, before);
    if (info)
        charter__v1__workflow_info__free_unpacked(info, NULL);
}

static void expect_refused(const char *def, const char *expect)
{
    char *json = dq(def);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    expect_refused_bytes(json, strlen(json), expect);
    free(json);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(2 * 1024 * 1024);
    size_t n = buf ? fread(buf, 1, 2 * 1024 * 1024 - 1, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = '\0';
    *len = n;
    return buf;
}

static void sha256_hex(const char *data, size_t len, char hex[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static Charter__V1__RunView *create_run(const char *workflow, const char *mode)
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.workflow = (char *)(workflow ? workflow : "");
    req.mode = (char *)mode;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    if (charter_create_run(op, &req, &v, &st) != 0)
        fprintf(stderr, "\n    CreateRun: %s: %s\n", charter_status_name(st.code), st.message);
    return v;
}

static Charter__V1__RunView *get_run(const char *id)
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = (char *)id;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    if (charter_get_run(op, &req, &v, &st) != 0)
        fprintf(stderr, "\n    GetRun: %s: %s\n", charter_status_name(st.code), st.message);
    return v;
}

static Charter__V1__RecoverRunResponse *recover(const char *id)
{
    Charter__V1__RecoverRunRequest req = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    req.run_id = (char *)id;
    Charter__V1__RecoverRunResponse *r = NULL;
    charter_status st;
    if (charter_recover_run(op, &req, &r, &st) != 0)
        fprintf(stderr, "\n    RecoverRun: %s: %s\n", charter_status_name(st.code), st.message);
    return r;
}

/* The step named in an event's JSON detail, or "". */
static void event_step(const Charter__V1__Event *e, char *out, size_t n)
{
    out[0] = '\0';
    json_t *d = e->detail ? json_loads(e->detail, 0, NULL) : NULL;
    const char *s = json_string_value(json_object_get(d, "step"));
    if (s)
        snprintf(out, n, "%s", s);
    json_decref(d);
}

static const Charter__V1__Event *find_event(const Charter__V1__RunView *v, const char *kind,
                                            const char *step, uint64_t after)
{
    for (size_t i = 0; i < v->n_events; i++) {
        char s[80];
        event_step(v->events[i], s, sizeof s);
        if (v->events[i]->seq > after && strcmp(v->events[i]->kind, kind) == 0 &&
            strcmp(s, step) == 0)
            return v->events[i];
    }
    return NULL;
}

static const Charter__V1__Delivery *delivery_to(const Charter__V1__RunView *v, const char *rcp)
{
    for (size_t i = 0; i < v->n_deliveries; i++)
        if (strcmp(v->deliveries[i]->recipient, rcp) == 0)
            return v->deliveries[i];
    return NULL;
}

static bool strs_equal(char **items, size_t n, const char *const *want, size_t wn)
{
    if (n != wn)
        return false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(items[i], want[i]) != 0)
            return false;
    return true;
}

/* ---- refusals: nothing is written ---------------------------------------------------------- */

static void test_malformed_definitions_are_refused_with_field_and_rule(void)
{
    expect_refused("{'name':'mini',", "definition: not valid JSON");
    expect_refused("[" M_OK "]", "definition: must be an object");
    expect_refused("{'name':'mini','name':'again','task':'t'}", "duplicate object key");
    expect_refused_bytes("", 0, "definition: empty");
    expect_refused("{'name':'mini','task':'t','colour':'red','resources':[" M_RES
                   "],'recipients':[" M_RCP "],'actors':[" M_ACT "],'grants':[" M_GRANTS
                   "],'steps':[" M_STEP "]}",
                   "colour: unknown field");
    expect_refused("{'name':'mini','task':'t','resources':[" M_RES "],'recipients':[" M_RCP
                   "],'actors':[" M_ACT "],'grants':[" M_GRANTS "]}",
                   "steps: required field is missing");
    expect_refused("{'name':'bad name','task':'t','resources':[],'recipients':[],'actors':[],"
                   "'grants':[],'steps':[]}",
                   "name: \"bad name\" is not a valid id");
    expect_refused("{'name':'mini','task':'','resources':[],'recipients':[],'actors':[],"
                   "'grants':[],'steps':[]}",
                   "task: must not be empty");
}

static void test_bad_resources_recipients_and_actors_are_refused(void)
{
    expect_refused(M_RESX("{'id':'m_quote','title':'Quote','confidentiality':'secret',"
                          "'integrity':'untrusted','content':'q'}"),
                   "resources[0].confidentiality: \"secret\" is not one of public, internal, "
                   "confidential");
    expect_refused(M_RESX("{'id':'m_quote','title':'Quote','confidentiality':'public',"
                          "'integrity':'maybe','content':'q'}"),
                   "resources[0].integrity: \"maybe\" is not one of untrusted, trusted");
    expect_refused(M_RESX("{'id':'m_quote','title':'Q','confidentiality':'public',"
                          "'integrity':'trusted','content':'q'},{'id':'m_quote','title':'Q2',"
                          "'confidentiality':'public','integrity':'trusted','content':'q'}"),
                   "resources[1].id: duplicate resource id \"m_quote\"");
    expect_refused(M_RESX("{'id':'m_quote','title':'Quote','confidentiality':'public',"
                          "'integrity':'untrusted'}"),
                   "resources[0].content: required field is missing");
    expect_refused(MDEF(M_RES, "{'id':'m_pub','clearance':'top'}", M_ACT, M_GRANTS, M_STEP, ""),
                   "recipients[0].clearance: \"top\" is not one of public, internal, confidential");
    expect_refused(MDEF(M_RES, M_RCP, "{'id':'m_owner','kind':'robot'}", M_GRANTS, M_STEP, ""),
                   "actors[0].kind: \"robot\" is not one of human, agent");
    /* 65 characters: one more than an id may hold. */
    expect_refused(M_RESX(M_RES ",{'id':'m_abcdefghij0123456789abcdefghij0123456789abcdefghij"
                                "0123456789abc','title':'Q','confidentiality':'public',"
                                "'integrity':'trusted','content':'q'}"),
                   "resources[2].id: 65 bytes, at most 64");
}

static void test_bad_grants_are_refused(void)
{
    expect_refused(M_GRANTSX("{'id':'m_root','grantee':'m_ghost','issuer':'m_owner','tools':[],"
                             "'recipients':[],'resources':[],'valid_from':'" T0 "',"
                             "'valid_to':'" T1 "'}"),
                   "grants[0].grantee: unknown actor \"m_ghost\"");
    expect_refused(M_GRANTSX("{'id':'m_root','grantee':'m_owner','issuer':'m_bot',"
                             "'tools':['read_source','send'],'recipients':['m_pub','m_boss'],"
                             "'resources':['m_quote','m_memo'],'valid_from':'" T0 "',"
                             "'valid_to':'" T1 "'}," M_GBOT),
                   "grants[0].issuer: root grant m_root is issued by m_bot, an agent; a root "
                   "grant's issuer must be a human actor");
    expect_refused(M_GRANTSX(M_ROOT ",{'id':'m_gbot','grantee':'m_bot','issuer':'m_owner',"
                                    "'delegated_from':'m_root','tools':[],'recipients':[],"
                                    "'resources':[],'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[1].issuer: only a root grant has an issuer");
    expect_refused(M_GRANTSX(M_ROOT ",{'id':'m_gbot','grantee':'m_bot','tools':[],"
                                    "'recipients':[],'resources':[],'valid_from':'" T0 "',"
                                    "'valid_to':'" T1 "'}"),
                   "grants[1]: grant m_gbot needs issuer (a root grant) or delegated_from");
    expect_refused(M_GRANTSX(M_ROOT ",{'id':'m_gbot','grantee':'m_bot','delegated_from':'m_nope',"
                                    "'tools':[],'recipients':[],'resources':[],"
                                    "'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[1].delegated_from: unknown grant \"m_nope\"");
    /* Attenuation: a delegated grant only narrows its parent. */
    expect_refused(M_GRANTSX(M_ROOT ",{'id':'m_gbot','grantee':'m_bot','delegated_from':'m_root',"
                                    "'tools':['read_source','send','publish'],"
                                    "'recipients':['m_pub'],'resources':['m_quote'],"
                                    "'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[1].tools: \"publish\" is not in the parent grant m_root's tools "
                   "(widening)");
    expect_refused(M_GRANTSX(M_ROOT ",{'id':'m_gbot','grantee':'m_bot','delegated_from':'m_root',"
                                    "'tools':['read_source','send'],'recipients':['m_pub'],"
                                    "'resources':['m_quote'],'valid_from':'" T0 "',"
                                    "'valid_to':'2031-01-01T00:00:00Z'}"),
                   "grants[1].valid_to: 2031-01-01T00:00:00Z is after the parent grant m_root's "
                   "valid_to 2030-01-01T00:00:00Z (widening)");
    expect_refused(M_GRANTSX("{'id':'m_root','grantee':'m_owner','delegated_from':'m_gbot',"
                             "'tools':[],'recipients':[],'resources':[],'valid_from':'" T0 "',"
                             "'valid_to':'" T1 "'},{'id':'m_gbot','grantee':'m_bot',"
                             "'delegated_from':'m_root','tools':[],'recipients':[],"
                             "'resources':[],'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[0].delegated_from: delegation cycle m_root -> m_gbot -> m_root");
    expect_refused(M_GRANTSX("{'id':'m_root','grantee':'m_owner','issuer':'m_owner',"
                             "'tools':[],'recipients':[],'resources':[],"
                             "'valid_from':'2026-02-29T00:00:00Z','valid_to':'" T1 "'}"),
                   "grants[0].valid_from: \"2026-02-29T00:00:00Z\" is not an RFC 3339 UTC time");
    expect_refused(M_GRANTSX("{'id':'m_root','grantee':'m_owner','issuer':'m_owner',"
                             "'tools':[],'recipients':[],'resources':[],"
                             "'valid_from':'" T1 "','valid_to':'" T0 "'}"),
                   "grants[0].valid_to: 2026-01-01T00:00:00Z is not after valid_from");
    expect_refused(M_GRANTSX(M_ROOT ",{'id':'m_gbot','grantee':'m_bot','delegated_from':'m_root',"
                                    "'tools':['send'],'recipients':['m_ceo'],'resources':[],"
                                    "'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[1].recipients: unknown recipient \"m_ceo\"");
}

static void test_bad_steps_are_refused(void)
{
    expect_refused(M_STEPSX("{'name':'one','actor':'m_bot2','grant':'m_gbot','tools':[],"
                            "'recipients':[],'resources':[],'reads':[],'receives':[],"
                            "'output_title':'Out'}"),
                   "steps[0].grant: grant m_gbot is granted to m_bot, not to the step's actor "
                   "m_bot2");
    expect_refused(M_STEPSX(M_STEPX("one", "'read_source'", "", "'m_quote','m_memo'", "", "", "")),
                   "steps[0].resources: \"m_memo\" is not in the step's grant m_gbot's resources");
    expect_refused(M_STEPSX(M_STEPX("one", "'read_source'", "", "'m_quote'", "'m_memo'", "", "")),
                   "steps[0].reads: \"m_memo\" is not in the step's resources");
    expect_refused(M_STEPSX(M_STEPX("one", "", "", "", "", "'two'",
                                    "") "," M_STEPX("two", "", "", "", "", "", "")),
                   "steps[0].receives: \"two\" is not an earlier step");
    expect_refused(M_STEPSX(M_STEPX("one", "'send'", "'m_pub'", "", "", "",
                                    ",'deliver':{'tool':'fax','recipient':'m_pub'}")),
                   "steps[0].deliver.tool: \"fax\" is not in the step's tools");
    expect_refused(M_STEPSX(M_STEPX("one", "", "", "", "", "", ",'recovery':true") "," M_STEPX(
                       "two", "", "", "", "", "", ",'recovery':true")),
                   "steps[1].recovery: only one step may be the recovery step");
    expect_refused(M_STEPSX(M_STEPX("one", "", "", "", "", "",
                                    ",'public_fields':{'v':['a']},'public_template':'{price}'")),
                   "steps[0].public_template: placeholder {price} is not a declared public field");
    expect_refused(M_STEPSX(M_STEPX("one", "", "", "", "", "", ",'public_fields':{'v':['a']}")),
                   "public_fields and public_template go together");
    /* An allowlist left out is an error, never "unrestricted". */
    expect_refused(M_STEPSX("{'name':'one','actor':'m_bot','grant':'m_gbot','tools':[],"
                            "'resources':[],'reads':[],'receives':[],'output_title':'Out'}"),
                   "steps[0].recipients: required field is missing");
    expect_refused(M_STEPSX(M_STEPX("one", "", "", "", "", "",
                                    ",'script':{'content':'c','handoff':['everything']}")),
                   "steps[0].script.handoff: \"everything\" is not one of output, inputs");
}

static void test_bad_expectations_are_refused(void)
{
    expect_refused(M_EXPECT("{'step':'nope','event':'delivery_decided','outcome':'allow'}"),
                   "expect[0].step: \"nope\" is not a step of the definition");
    expect_refused(M_EXPECT("{'step':'one','event':'delivered','outcome':'allow'}"),
                   "expect[0].event: \"delivered\" is not one of input_checked, delivery_decided");
    expect_refused(M_EXPECT("{'step':'one','event':'delivery_decided','outcome':'maybe'}"),
                   "expect[0].outcome: \"maybe\" is not one of allow, deny, unknown");
    expect_refused(M_EXPECT("{'step':'one','event':'delivery_decided','outcome':'allow',"
                            "'codes':['GRANT_INVALID']}"),
                   "expect[0].codes: an allow carries no codes");
    expect_refused(M_EXPECT("{'step':'one','event':'delivery_decided','outcome':'deny',"
                            "'codes':['OUT_OF_SCOPE']}"),
                   "expect[0].codes[0]: \"OUT_OF_SCOPE\" is not a decision code");
    expect_refused(M_EXPECT("{'recover':true,'outcome':'allow'}"),
                   "expect[0].recover: the definition has no recovery step");
    expect_refused(M_EXPECT("{'status':'completed'},{'step':'one','event':'input_checked',"
                            "'outcome':'allow','status':'blocked'}"),
                   "expect[1]: has both event and status");
    expect_refused(M_EXPECT("{'status':'done'}"),
                   "expect[0].status: \"done\" is not one of created, queued, running, blocked");
    expect_refused(M_EXPECT("{'delivery':'m_ceo'}"), "expect[0].delivery: unknown recipient "
                                                     "\"m_ceo\"");
    expect_refused(M_EXPECT("{'outcome':'allow'}"),
                   "expect[0]: needs one of event, recover, status, delivery");
}

static void test_definition_over_one_mib_is_refused(void)
{
    size_t len = 1024 * 1024 + 1;
    char *big = malloc(len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    memset(big, ' ', len);
    big[0] = '{';
    big[len - 1] = '}';
    expect_refused_bytes(big, len, "definition: 1048577 bytes, at most 1048576 (limit)");
    free(big);
}

/* Node ids are global in a graph: the reference workflow's ids mean its nodes. */
static void test_ids_clashing_with_other_nodes_are_refused(void)
{
    expect_refused(M_RESX(M_RES ",{'id':'budget','title':'Budget memo','confidentiality':'public',"
                                "'integrity':'trusted','content':'Nothing secret here.'}"),
                   "resources[2].id: resource \"budget\" is already in the graph and differs in "
                   "confidentiality");
    expect_refused(MDEF(M_RES,
                        M_RCP ","
                              "{'id':'cfo','clearance':'public'}",
                        M_ACT, M_GRANTS, M_STEP, ""),
                   "recipients[2].id: recipient \"cfo\" is already in the graph and differs in "
                   "clearance");
    expect_refused(
        MDEF(M_RES, M_RCP, M_ACT ",{'id':'human_cfo','kind':'agent'}", M_GRANTS, M_STEP, ""),
        "actors[3].id: actor \"human_cfo\" is already in the graph and differs in "
        "kind");
    expect_refused(M_GRANTSX(M_GRANTS ",{'id':'g_reporter','grantee':'m_bot',"
                                      "'delegated_from':'m_root','tools':['send'],"
                                      "'recipients':['m_pub'],'resources':['m_quote'],"
                                      "'valid_from':'" T0 "','valid_to':'" T1 "'}"),
                   "grants[2].id: grant \"g_reporter\" is already in the graph and differs in "
                   "tools");
}

static void test_viewer_cannot_apply(void)
{
    char before[65], after[65];
    CU_ASSERT_EQUAL_FATAL(digest(before), 0);
    char *json = dq(M_OK);
    Charter__V1__WorkflowInfo *info = NULL;
    charter_status st;
    CU_ASSERT_EQUAL(apply_bytes(viewer, json, strlen(json), &info, &st),
                    -CHARTER_PERMISSION_DENIED);
    free(json);
    CU_ASSERT_EQUAL_FATAL(digest(after), 0);
    CU_ASSERT_STRING_EQUAL(after, before);
}

/* ---- applying -------------------------------------------------------------------------------- */

static void test_startup_workflow_is_stored_as_its_version(void)
{
    size_t len = 0;
    char *bytes = read_file(CHARTER_SOURCE_DIR "/deploy/workflows/procurement.json", &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    char version[65];
    sha256_hex(bytes, len, version);
    Charter__V1__GetWorkflowRequest req = CHARTER__V1__GET_WORKFLOW_REQUEST__INIT;
    req.workflow = "procurement";
    Charter__V1__WorkflowDefinition *d = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_get_workflow(op, &req, &d, &st), 0);
    CU_ASSERT_STRING_EQUAL(d->info->version, version);
    CU_ASSERT_STRING_EQUAL(d->info->name, "procurement");
    CU_ASSERT_EQUAL(d->info->n_steps, 3);
    CU_ASSERT_EQUAL(d->definition.len, len);
    CU_ASSERT_TRUE(d->definition.len == len && memcmp(d->definition.data, bytes, len) == 0);
    charter__v1__workflow_definition__free_unpacked(d, NULL);

    /* A viewer sees the info, never the definition's bytes (they hold the budget memo). */
    CU_ASSERT_EQUAL_FATAL(charter_get_workflow(viewer, &req, &d, &st), 0);
    CU_ASSERT_STRING_EQUAL(d->info->version, version);
    CU_ASSERT_EQUAL(d->definition.len, 0);
    charter__v1__workflow_definition__free_unpacked(d, NULL);

    /* Applying the file charterd started with changes nothing. */
    char before[65], after[65];
    CU_ASSERT_EQUAL_FATAL(digest(before), 0);
    Charter__V1__WorkflowInfo *info = NULL;
    CU_ASSERT_EQUAL_FATAL(apply_bytes(op, bytes, len, &info, &st), 0);
    CU_ASSERT_FALSE(info->created);
    CU_ASSERT_STRING_EQUAL(info->version, version);
    charter__v1__workflow_info__free_unpacked(info, NULL);
    CU_ASSERT_EQUAL_FATAL(digest(after), 0);
    CU_ASSERT_STRING_EQUAL(after, before);
    free(bytes);

    req.workflow = "no_such_workflow";
    CU_ASSERT_EQUAL(charter_get_workflow(op, &req, &d, &st), -CHARTER_NOT_FOUND);
}

static void test_applying_the_same_definition_twice_is_a_no_op(void)
{
    Charter__V1__WorkflowInfo *first = apply_ok(M_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(first);
    CU_ASSERT_TRUE(first->created);
    CU_ASSERT_STRING_EQUAL(first->name, "mini");
    CU_ASSERT_EQUAL(strlen(first->version), 64);
    CU_ASSERT_TRUE(first->applied_at > 0);
    CU_ASSERT_EQUAL_FATAL(first->n_steps, 1);
    CU_ASSERT_STRING_EQUAL(first->steps[0], "one");

    char before[65], after[65];
    CU_ASSERT_EQUAL_FATAL(digest(before), 0);
    Charter__V1__WorkflowInfo *second = apply_ok(M_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(second);
    CU_ASSERT_FALSE(second->created);
    CU_ASSERT_STRING_EQUAL(second->version, first->version);
    CU_ASSERT_EQUAL(second->applied_at, first->applied_at);
    CU_ASSERT_EQUAL_FATAL(digest(after), 0);
    CU_ASSERT_STRING_EQUAL(after, before);

    /* Listed once. */
    Charter__V1__ListWorkflowsResponse *l = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_list_workflows(viewer, NULL, &l, &st), 0);
    size_t seen = 0;
    for (size_t i = 0; i < l->n_workflows; i++)
        seen += strcmp(l->workflows[i]->version, first->version) == 0;
    CU_ASSERT_EQUAL(seen, 1);
    charter__v1__list_workflows_response__free_unpacked(l, NULL);

    /* Another definition whose nodes are identical to stored ones shares them. */
    Charter__V1__WorkflowInfo *other = apply_ok(
        "{'name':'mini_two','task':'Send it again.','resources':[" M_RES "],'recipients':[" M_RCP
        "],'actors':[" M_ACT "],'grants':[" M_GRANTS "],'steps':[" M_STEP "]}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(other);
    CU_ASSERT_TRUE(other->created);
    CU_ASSERT_STRING_NOT_EQUAL(other->version, first->version);
    charter__v1__workflow_info__free_unpacked(other, NULL);
    charter__v1__workflow_info__free_unpacked(first, NULL);
    charter__v1__workflow_info__free_unpacked(second, NULL);
}

static void test_create_run_of_an_unknown_workflow_is_not_found(void)
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.workflow = "never_applied";
    Charter__V1__RunView *v = NULL;
    charter_status st;
    CU_ASSERT_EQUAL(charter_create_run(op, &req, &v, &st), -CHARTER_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "never_applied"));
    req.workflow = "not a name";
    CU_ASSERT_EQUAL(charter_create_run(op, &req, &v, &st), -CHARTER_INVALID_ARGUMENT);
}

/* ---- runs pin their version ---------------------------------------------------------------- */

static void test_run_keeps_its_version_when_the_name_moves_on(void)
{
    Charter__V1__WorkflowInfo *v1 = apply_ok(PIN_V1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v1);
    Charter__V1__RunView *run = create_run("pin", "scripted");
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    char run_id[129];
    snprintf(run_id, sizeof run_id, "%s", run->run->id);
    CU_ASSERT_STRING_EQUAL(run->run->workflow, v1->version);
    CU_ASSERT_STRING_EQUAL(run->run->status, "blocked");
    const Charter__V1__Event *e = find_event(run, "input_checked", "publish", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_STRING_EQUAL(e->witness, "p_secret (confidential) \xe2\x86\x92 Gathered \xe2\x86\x92 "
                                       "publish step {p_note}");
    charter__v1__run_view__free_unpacked(run, NULL);

    /* The name moves on to a definition with other ids and steps. */
    Charter__V1__WorkflowInfo *v2 = apply_ok(PIN_V2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v2);
    CU_ASSERT_STRING_NOT_EQUAL(v2->version, v1->version);
    Charter__V1__GetWorkflowRequest g = CHARTER__V1__GET_WORKFLOW_REQUEST__INIT;
    g.workflow = "pin";
    Charter__V1__WorkflowDefinition *d = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_get_workflow(op, &g, &d, &st), 0);
    CU_ASSERT_STRING_EQUAL(d->info->version, v2->version);
    charter__v1__workflow_definition__free_unpacked(d, NULL);

    /* The old run still reports and acts under version 1: its steps, not version 2's. */
    run = get_run(run_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    CU_ASSERT_STRING_EQUAL(run->run->workflow, v1->version);
    charter__v1__run_view__free_unpacked(run, NULL);
    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    os.run_id = run_id;
    os.step = "announce";
    Charter__V1__StepContext *ctx = NULL;
    CU_ASSERT_EQUAL(charter_open_step(op, &os, &ctx, &st), -CHARTER_NOT_FOUND);

    Charter__V1__RecoverRunResponse *r = recover(run_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_STRING_EQUAL(r->step, "publish");
    CU_ASSERT_STRING_EQUAL(r->recipient, "p_pub");
    CU_ASSERT_STRING_EQUAL(r->run->status, "completed");
    CU_ASSERT_STRING_EQUAL(r->run->workflow, v1->version);
    charter__v1__recover_run_response__free_unpacked(r, NULL);

    /* A new run of the name follows version 2. */
    run = create_run("pin", "scripted");
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    CU_ASSERT_STRING_EQUAL(run->run->workflow, v2->version);
    CU_ASSERT_STRING_EQUAL(run->run->status, "completed");
    CU_ASSERT_PTR_NOT_NULL(delivery_to(run, "q_pub"));
    charter__v1__run_view__free_unpacked(run, NULL);

    /* A run of the startup workflow (no workflow named) follows the reference version. */
    run = create_run(NULL, "external");
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    Charter__V1__GetWorkflowRequest p = CHARTER__V1__GET_WORKFLOW_REQUEST__INIT;
    p.workflow = "procurement";
    CU_ASSERT_EQUAL_FATAL(charter_get_workflow(op, &p, &d, &st), 0);
    CU_ASSERT_STRING_EQUAL(run->run->workflow, d->info->version);
    charter__v1__workflow_definition__free_unpacked(d, NULL);
    charter__v1__run_view__free_unpacked(run, NULL);
    charter__v1__workflow_info__free_unpacked(v1, NULL);
    charter__v1__workflow_info__free_unpacked(v2, NULL);
}

/* ---- narrowing ------------------------------------------------------------------------------- */

static char ext_run[129];
static char src_a[129], src_b[129]; /* vendor_a and vendor_b source artifacts */

static Charter__V1__StepContext *open_step(const char *step, const char *parent, char **res,
                                           size_t n_res, char **tools, size_t n_tools,
                                           charter_status *st)
{
    Charter__V1__OpenStepRequest req = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    req.run_id = ext_run;
    req.step = (char *)step;
    req.parent_context_id = (char *)(parent ? parent : "");
    req.resources = res;
    req.n_resources = n_res;
    req.tools = tools;
    req.n_tools = n_tools;
    Charter__V1__StepContext *ctx = NULL;
    if (charter_open_step(op, &req, &ctx, st) != 0)
        return NULL;
    return ctx;
}

static Charter__V1__CheckInputResponse *check_input(const char *ctx, const char *artifact)
{
    Charter__V1__CheckInputRequest req = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
    char *ids[1] = {(char *)artifact};
    req.context_id = (char *)ctx;
    req.artifact_ids = ids;
    req.n_artifact_ids = 1;
    Charter__V1__CheckInputResponse *r = NULL;
    charter_status st;
    if (charter_check_input(op, &req, &r, &st) != 0)
        fprintf(stderr, "\n    CheckInput: %s: %s\n", charter_status_name(st.code), st.message);
    return r;
}

static int read_source(const char *ctx, const char *resource, char out[129])
{
    Charter__V1__ReadSourceRequest req = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    req.context_id = (char *)ctx;
    req.resource_id = (char *)resource;
    Charter__V1__ReadSourceResponse *r = NULL;
    charter_status st;
    if (charter_read_source(op, &req, &r, &st) != 0)
        return -1;
    int rc = r->artifact ? 0 : -1;
    if (r->artifact)
        snprintf(out, 129, "%s", r->artifact->id);
    charter__v1__read_source_response__free_unpacked(r, NULL);
    return rc;
}

static void narrowing_setup(void)
{
    if (ext_run[0])
        return;
    Charter__V1__RunView *run = create_run(NULL, "external");
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    snprintf(ext_run, sizeof ext_run, "%s", run->run->id);
    charter__v1__run_view__free_unpacked(run, NULL);
    charter_status st;
    Charter__V1__StepContext *research = open_step("research", NULL, NULL, 0, NULL, 0, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(research);
    CU_ASSERT_EQUAL_FATAL(read_source(research->context_id, "vendor_a", src_a), 0);
    CU_ASSERT_EQUAL_FATAL(read_source(research->context_id, "vendor_b", src_b), 0);
    charter__v1__step_context__free_unpacked(research, NULL);
}

static void test_narrowed_child_is_denied_an_input_its_parent_allows(void)
{
    narrowing_setup();
    charter_status st;
    Charter__V1__StepContext *parent = open_step("report", NULL, NULL, 0, NULL, 0, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(parent);
    CU_ASSERT_EQUAL(parent->n_resources, 3);
    CU_ASSERT_STRING_EQUAL(parent->parent_context_id, "");
    CU_ASSERT_EQUAL(strlen(parent->workflow), 64);

    char *only_a[] = {"vendor_a"};
    Charter__V1__StepContext *child =
        open_step("report", parent->context_id, only_a, 1, NULL, 0, &st);
    if (!child)
        fprintf(stderr, "\n    OpenStep (child): %s\n", st.message);
    CU_ASSERT_PTR_NOT_NULL_FATAL(child);
    CU_ASSERT_STRING_EQUAL(child->parent_context_id, parent->context_id);
    CU_ASSERT_STRING_EQUAL(child->run_id, ext_run);
    CU_ASSERT_STRING_EQUAL(child->step, "report");
    CU_ASSERT_STRING_EQUAL(child->actor, "reporter");
    CU_ASSERT_STRING_EQUAL(child->grant, "g_reporter");
    CU_ASSERT_STRING_EQUAL(child->workflow, parent->workflow);
    CU_ASSERT_TRUE(
        strs_equal(child->resources, child->n_resources, (const char *[]){"vendor_a"}, 1));
    /* Lists left empty keep the parent's. */
    CU_ASSERT_TRUE(strs_equal(child->tools, child->n_tools, (const char *[]){"deliver_public"}, 1));
    CU_ASSERT_TRUE(
        strs_equal(child->recipients, child->n_recipients, (const char *[]){"public"}, 1));

    /* The parent admits vendor_b's lineage; the child does not. */
    Charter__V1__CheckInputResponse *r = check_input(parent->context_id, src_b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    charter__v1__check_input_response__free_unpacked(r, NULL);
    r = check_input(child->context_id, src_b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_TRUE(
        harness_has_code(r->decision->codes, r->decision->n_codes, "INPUT_OUT_OF_SCOPE"));
    CU_ASSERT_STRING_EQUAL(r->decision->witness, "vendor_b (public) \xe2\x86\x92 report step "
                                                 "{vendor_a}");
    charter__v1__check_input_response__free_unpacked(r, NULL);
    r = check_input(child->context_id, src_a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    charter__v1__check_input_response__free_unpacked(r, NULL);

    /* A grandchild narrows the child further, never back to the parent's. */
    char *tools[] = {"deliver_public"};
    Charter__V1__StepContext *grand =
        open_step("report", child->context_id, NULL, 0, tools, 1, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(grand);
    CU_ASSERT_TRUE(
        strs_equal(grand->resources, grand->n_resources, (const char *[]){"vendor_a"}, 1));
    r = check_input(grand->context_id, src_b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    charter__v1__check_input_response__free_unpacked(r, NULL);
    charter__v1__step_context__free_unpacked(grand, NULL);
    charter__v1__step_context__free_unpacked(child, NULL);
    charter__v1__step_context__free_unpacked(parent, NULL);
}

static void test_widening_a_parent_is_refused_and_writes_nothing(void)
{
    narrowing_setup();
    charter_status st;
    Charter__V1__StepContext *parent = open_step("report", NULL, NULL, 0, NULL, 0, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(parent);
    char *only_a[] = {"vendor_a"};
    Charter__V1__StepContext *child =
        open_step("report", parent->context_id, only_a, 1, NULL, 0, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(child);

    char before[65], after[65];
    CU_ASSERT_EQUAL_FATAL(digest(before), 0);
    /* Back to a resource the parent had but the child gave up. */
    char *a_and_b[] = {"vendor_a", "vendor_b"};
    CU_ASSERT_PTR_NULL(open_step("report", child->context_id, a_and_b, 2, NULL, 0, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_PERMISSION_DENIED);
    CU_ASSERT_EQUAL(strncmp(st.message, "SCOPE_WIDENING", 14), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "\"vendor_b\""));
    /* Beyond the step: the budget, or a tool of another step. */
    char *budget[] = {"budget"};
    CU_ASSERT_PTR_NULL(open_step("report", parent->context_id, budget, 1, NULL, 0, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_PERMISSION_DENIED);
    CU_ASSERT_EQUAL(strncmp(st.message, "SCOPE_WIDENING: resources: \"budget\"", 35), 0);
    char *internal[] = {"deliver_internal"};
    CU_ASSERT_PTR_NULL(open_step("report", parent->context_id, NULL, 0, internal, 1, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_PERMISSION_DENIED);
    CU_ASSERT_EQUAL(strncmp(st.message, "SCOPE_WIDENING: tools:", 22), 0);
    CU_ASSERT_EQUAL_FATAL(digest(after), 0);
    CU_ASSERT_STRING_EQUAL(after, before);

    /* A child is of its parent's step and run; lists without a parent narrow nothing. */
    CU_ASSERT_PTR_NULL(open_step("analyze", parent->context_id, only_a, 1, NULL, 0, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(open_step("report", NULL, only_a, 1, NULL, 0, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(open_step("report", "c999999", only_a, 1, NULL, 0, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_NOT_FOUND);
    CU_ASSERT_EQUAL_FATAL(digest(after), 0);
    CU_ASSERT_STRING_EQUAL(after, before);
    charter__v1__step_context__free_unpacked(child, NULL);
    charter__v1__step_context__free_unpacked(parent, NULL);
}

static void test_narrowed_tools_bind_the_delivery(void)
{
    narrowing_setup();
    charter_status st;
    Charter__V1__StepContext *analyze = open_step("analyze", NULL, NULL, 0, NULL, 0, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(analyze);
    char *read_only[] = {"read_source"};
    Charter__V1__StepContext *child =
        open_step("analyze", analyze->context_id, NULL, 0, read_only, 1, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(child);
    char budget[129];
    CU_ASSERT_EQUAL_FATAL(read_source(child->context_id, "budget", budget), 0);

    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    char *inputs[1] = {budget};
    ro.context_id = child->context_id;
    ro.input_ids = inputs;
    ro.n_input_ids = 1;
    ro.title = "Budget note";
    ro.content = "Within budget.";
    Charter__V1__RecordOutputResponse *out = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_record_output(op, &ro, &out, &st), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out->artifact);

    Charter__V1__DeliverRequest dr = CHARTER__V1__DELIVER_REQUEST__INIT;
    dr.payload_id = out->artifact->id;
    dr.recipient = "cfo";
    dr.tool = "deliver_internal";
    /* The parent's capability would send it to the CFO; the child gave the tool up. */
    dr.context_id = child->context_id;
    dr.invocation_id = "narrow-child-send";
    Charter__V1__DeliverResponse *d = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_deliver(op, &dr, &d, &st), 0);
    CU_ASSERT_EQUAL(d->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_TRUE(harness_has_code(d->decision->codes, d->decision->n_codes, "STEP_MISMATCH"));
    CU_ASSERT_PTR_NULL(d->delivery);
    charter__v1__deliver_response__free_unpacked(d, NULL);
    dr.context_id = analyze->context_id;
    dr.invocation_id = "narrow-parent-send";
    CU_ASSERT_EQUAL_FATAL(charter_deliver(op, &dr, &d, &st), 0);
    CU_ASSERT_EQUAL(d->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    charter__v1__deliver_response__free_unpacked(d, NULL);
    charter__v1__record_output_response__free_unpacked(out, NULL);
    charter__v1__step_context__free_unpacked(child, NULL);
    charter__v1__step_context__free_unpacked(analyze, NULL);
}

/* ---- a model reply never widens a step ------------------------------------------------------ */

static void test_scripted_reply_naming_a_recipient_is_refused(void)
{
    /* The script is the model's reply: it has no place for a recipient, tools or a grant. */
    expect_refused(M_STEPSX(M_STEPX("one", "", "", "", "", "",
                                    ",'script':{'content':'c','recipient':'m_boss'}")),
                   "steps[0].script.recipient: unknown field");
    expect_refused(
        M_STEPSX(M_STEPX("one", "", "", "", "", "", ",'script':{'content':'c','grant':'m_root'}")),
        "steps[0].script.grant: unknown field");
}

static void test_scripted_fields_naming_a_recipient_are_ignored_or_refused(void)
{
    /* A step without public rendering: fields that name another recipient, tools and a grant
     * are never read; the send goes where the step says. */
    Charter__V1__WorkflowInfo *w =
        apply_ok("{'name':'w_fields','task':'Send a quote.','resources':[" M_RES
                 "],'recipients':[" M_RCP "],'actors':[" M_ACT "],'grants':[" M_GRANTS "],'steps':["
                 "{'name':'one','actor':'m_bot','grant':'m_gbot','tools':['read_source','send'],"
                 "'recipients':['m_pub'],'resources':['m_quote'],'reads':['m_quote'],'receives':[],"
                 "'output_title':'Out','deliver':{'tool':'send','recipient':'m_pub'},"
                 "'script':{'content':'c','fields':{'recipient':'m_boss','tools':'send,publish',"
                 "'grant':'m_root','actor':'m_owner','resources':'m_memo'},'handoff':[]}}]}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    Charter__V1__RunView *run = create_run(w->version, "scripted");
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    CU_ASSERT_STRING_EQUAL(run->run->status, "completed");
    CU_ASSERT_EQUAL_FATAL(run->n_deliveries, 1);
    CU_ASSERT_STRING_EQUAL(run->deliveries[0]->recipient, "m_pub");
    CU_ASSERT_STRING_EQUAL(run->deliveries[0]->tool, "send");
    CU_ASSERT_EQUAL_FATAL(run->deliveries[0]->n_grant_chain, 2);
    CU_ASSERT_STRING_EQUAL(run->deliveries[0]->grant_chain[0], "m_gbot");
    CU_ASSERT_PTR_NULL(delivery_to(run, "m_boss"));
    charter__v1__run_view__free_unpacked(run, NULL);
    charter__v1__workflow_info__free_unpacked(w, NULL);

    /* A step with public rendering: a field the step does not declare refuses the rendering,
     * so nothing is sent. */
    w = apply_ok(
        "{'name':'w_public','task':'Send a quote.','resources':[" M_RES "],'recipients':[" M_RCP
        "],'actors':[" M_ACT "],'grants':[" M_GRANTS "],'steps':["
        "{'name':'one','actor':'m_bot','grant':'m_gbot','tools':['read_source','send'],"
        "'recipients':['m_pub'],'resources':['m_quote'],'reads':['m_quote'],'receives':[],"
        "'output_title':'Out','deliver':{'tool':'send','recipient':'m_pub'},"
        "'public_fields':{'pick':['a','b']},'public_template':'Pick {pick}.',"
        "'script':{'content':'c','fields':{'pick':'a','recipient':'m_boss'},'handoff':[]}}]}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    run = create_run(w->version, "scripted");
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    CU_ASSERT_STRING_EQUAL(run->run->status, "error");
    CU_ASSERT_EQUAL(run->n_deliveries, 0);
    bool rejected = false;
    for (size_t i = 0; i < run->n_events; i++)
        rejected = rejected || strcmp(run->events[i]->kind, "output_rejected") == 0;
    CU_ASSERT_TRUE(rejected);
    charter__v1__run_view__free_unpacked(run, NULL);
    charter__v1__workflow_info__free_unpacked(w, NULL);
}

/* ---- the support workflow end to end ------------------------------------------------------- */

static const char *REPLY_WITNESS = "payment_records (confidential) \xe2\x86\x92 Payment research "
                                   "\xe2\x86\x92 reply step {ticket}";

static void test_support_workflow_end_to_end(void)
{
    size_t len = 0;
    char *bytes = read_file(CHARTER_SOURCE_DIR "/deploy/workflows/support.json", &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    Charter__V1__WorkflowInfo *info = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(apply_bytes(op, bytes, len, &info, &st), 0);
    free(bytes);
    CU_ASSERT_STRING_EQUAL(info->name, "support");
    CU_ASSERT_EQUAL(info->n_steps, 4);

    Charter__V1__RunView *run = create_run("support", "scripted");
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    char run_id[129];
    snprintf(run_id, sizeof run_id, "%s", run->run->id);
    CU_ASSERT_STRING_EQUAL(run->run->workflow, info->version);
    CU_ASSERT_STRING_EQUAL(run->run->status, "blocked");

    /* The escalation to billing (clearance confidential) is allowed... */
    const Charter__V1__Event *e = find_event(run, "delivery_decided", "escalate", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->outcome, CHARTER__V1__OUTCOME__ALLOW);
    const Charter__V1__Delivery *billing = delivery_to(run, "billing");
    CU_ASSERT_PTR_NOT_NULL_FATAL(billing);
    CU_ASSERT_EQUAL_FATAL(billing->n_grant_chain, 2);
    CU_ASSERT_STRING_EQUAL(billing->grant_chain[0], "g_escalator");
    CU_ASSERT_STRING_EQUAL(billing->grant_chain[1], "g_support");
    /* ...and the handoff that followed the injection is refused before the writer's model. */
    e = find_event(run, "input_checked", "reply", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_TRUE(harness_has_code(e->codes, e->n_codes, "INPUT_OUT_OF_SCOPE"));
    CU_ASSERT_STRING_EQUAL(e->witness, REPLY_WITNESS);
    CU_ASSERT_PTR_NULL(find_event(run, "model_request", "reply", 0));
    CU_ASSERT_PTR_NULL(delivery_to(run, "customer"));
    uint64_t blocked_at = run->run->seq;
    charter__v1__run_view__free_unpacked(run, NULL);

    /* Recovery from permitted inputs: the reply goes to the customer. */
    Charter__V1__RecoverRunResponse *r = recover(run_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_STRING_EQUAL(r->step, "reply");
    CU_ASSERT_STRING_EQUAL(r->recipient, "customer");
    CU_ASSERT_STRING_EQUAL(r->run->status, "completed");
    charter__v1__recover_run_response__free_unpacked(r, NULL);

    run = get_run(run_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    e = find_event(run, "delivery_decided", "reply", blocked_at);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->outcome, CHARTER__V1__OUTCOME__ALLOW);
    const Charter__V1__Delivery *reply = delivery_to(run, "customer");
    CU_ASSERT_PTR_NOT_NULL_FATAL(reply);
    CU_ASSERT_EQUAL_FATAL(reply->n_grant_chain, 3);
    CU_ASSERT_STRING_EQUAL(reply->grant_chain[0], "g_writer");
    CU_ASSERT_STRING_EQUAL(reply->grant_chain[1], "g_escalator");
    CU_ASSERT_STRING_EQUAL(reply->grant_chain[2], "g_support");
    /* Rendered by the server from approved fields: no payment data in any form. */
    CU_ASSERT_STRING_EQUAL(reply->content,
                           "Hello, thank you for writing to us about invoice INV-2291. Status: a "
                           "refund of the duplicate charge has been requested. Next step: billing "
                           "confirms the refund within 5 business days. For your security we "
                           "never send card numbers or addresses by email.");
    CU_ASSERT_PTR_NULL(strstr(reply->content, "PAYREC"));
    CU_ASSERT_PTR_NULL(strstr(reply->content, "4929"));
    CU_ASSERT_PTR_NULL(strstr(reply->content, "0042"));
    CU_ASSERT_PTR_NULL(strstr(reply->content, "Harbour"));

    /* The reply's lineage reaches the ticket only. */
    Charter__V1__TraceArtifactRequest tr = CHARTER__V1__TRACE_ARTIFACT_REQUEST__INIT;
    tr.artifact_id = reply->payload_id;
    Charter__V1__TraceArtifactResponse *t = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_trace_artifact(op, &tr, &t, &st), 0);
    size_t sources = 0;
    for (size_t i = 0; i < t->n_artifacts; i++)
        for (size_t k = 0; k < t->artifacts[i]->n_resources; k++) {
            sources++;
            CU_ASSERT_STRING_EQUAL(t->artifacts[i]->resources[k], "ticket");
        }
    CU_ASSERT_TRUE(sources >= 1);
    charter__v1__trace_artifact_response__free_unpacked(t, NULL);
    charter__v1__run_view__free_unpacked(run, NULL);
    charter__v1__workflow_info__free_unpacked(info, NULL);
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test tests[] = {
    {"malformed definitions are refused with field and rule",
     test_malformed_definitions_are_refused_with_field_and_rule},
    {"bad resources, recipients and actors are refused",
     test_bad_resources_recipients_and_actors_are_refused},
    {"bad grants are refused", test_bad_grants_are_refused},
    {"bad steps are refused", test_bad_steps_are_refused},
    {"bad expectations are refused", test_bad_expectations_are_refused},
    {"definition over 1 MiB is refused", test_definition_over_one_mib_is_refused},
    {"ids clashing with other nodes are refused", test_ids_clashing_with_other_nodes_are_refused},
    {"viewer cannot apply", test_viewer_cannot_apply},
    {"startup workflow is stored as its version", test_startup_workflow_is_stored_as_its_version},
    {"applying the same definition twice is a no-op",
     test_applying_the_same_definition_twice_is_a_no_op},
    {"create run of an unknown workflow is not found",
     test_create_run_of_an_unknown_workflow_is_not_found},
    {"run keeps its version when the name moves on",
     test_run_keeps_its_version_when_the_name_moves_on},
    {"narrowed child is denied an input its parent allows",
     test_narrowed_child_is_denied_an_input_its_parent_allows},
    {"widening a parent is refused and writes nothing",
     test_widening_a_parent_is_refused_and_writes_nothing},
    {"narrowed tools bind the delivery", test_narrowed_tools_bind_the_delivery},
    {"scripted reply naming a recipient is refused",
     test_scripted_reply_naming_a_recipient_is_refused},
    {"scripted fields naming a recipient are ignored or refused",
     test_scripted_fields_naming_a_recipient_are_ignored_or_refused},
    {"support workflow end to end", test_support_workflow_end_to_end},
};
static const harness_suite suites[] = {
    {"workflows through the API", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
