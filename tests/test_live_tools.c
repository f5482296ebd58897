/*
 * test_live_tools.c - the live-tool part of a workflow definition: observed resources,
 * destination classes matched against a control argument, tools whose arguments have roles,
 * and what the validator says about each mistake. Pure: no database.
 *
 * Definitions are written with ' for " (swapped before loading), each one change away from
 * the minimal live definition LIVE(...).
 */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/tokens.h"
#include "policy/workflow.h"
#include "suite.h"

#ifndef CHARTER_SOURCE_DIR
#error "CHARTER_SOURCE_DIR (the source tree's root) must be defined by the build"
#endif

#define PAYMENTS_PATH CHARTER_SOURCE_DIR "/deploy/workflows/payments.json"

#define T0 "2026-01-01T00:00:00Z"
#define T1 "2030-01-01T00:00:00Z"
#define R_PAGE                                                                                     \
    "{'id':'page','title':'Fetched page','confidentiality':'public','integrity':'untrusted',"      \
    "'observed':{'max_bytes':64,'content_type':'text/html'}}"
#define RCP_LIVE                                                                                   \
    "{'id':'corp','clearance':'internal','match':{'suffix':'@corp.example'}},"                     \
    "{'id':'saved','clearance':'confidential','match':{'values':['DE89370400440532013000']}},"     \
    "{'id':'anyone','clearance':'public','match':{'pattern':'[^@ ]+@[^@ ]+'}}"
#define GRANT_LIVE                                                                                 \
    "{'id':'g','grantee':'h','issuer':'h','tools':['read_source','mail','fetch'],"                 \
    "'recipients':['corp','saved','anyone'],'resources':['page'],'valid_from':'" T0 "',"           \
    "'valid_to':'" T1 "'}"
#define STEP_LIVE                                                                                  \
    "{'name':'s','actor':'h','grant':'g','tools':['read_source','mail','fetch'],"                  \
    "'recipients':['corp','saved','anyone'],'resources':['page'],'reads':[],'receives':[],"        \
    "'output_title':'Out'}"
#define TOOL_MAIL                                                                                  \
    "'mail':{'arguments':[{'name':'to','role':'control'},{'name':'body','role':'data'}],"          \
    "'destination':'to','effect':true}"
#define TOOL_FETCH "'fetch':{'arguments':[{'name':'url','role':'control'}],'result':'page'}"
#define LIVE(res, rcp, tools)                                                                      \
    "{'name':'live','task':'Mail the page.','resources':[" res "],'recipients':[" rcp "],"         \
    "'actors':[{'id':'h','kind':'human'}],'grants':[" GRANT_LIVE "],'steps':[" STEP_LIVE "],"      \
    "'tools':{" tools "}}"
#define LIVE_OK LIVE(R_PAGE, RCP_LIVE, TOOL_MAIL "," TOOL_FETCH)

static char *dq(const char *s)
{
    char *out = strdup(s);
    for (char *p = out; p != NULL && *p != '\0'; p++) {
        if (*p == '\'') {
            *p = '"';
        }
    }
    return out;
}

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

/* def (with ' for ") must be refused with exactly the line expect. */
static void expect_refused(const char *def, const char *expect)
{
    char *json = dq(def);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    workflow *wf = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL(workflow_load_buffer(json, strlen(json), &wf, err, sizeof err), -1);
    CU_ASSERT_PTR_NULL(wf);
    if (strcmp(err, expect) != 0) {
        fprintf(stderr, "\n    expected: %s\n    got:      %s\n", expect, err);
    }
    CU_ASSERT_STRING_EQUAL(err, expect);
    free(json);
}

static void test_live_definition_loads_with_observed_resource_classes_and_tools(void)
{
    workflow *wf = load_ok(LIVE_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    long long max = 0;
    const char *type = NULL;
    CU_ASSERT_EQUAL(workflow_observed(wf, "page", &max, &type), 1);
    CU_ASSERT_EQUAL(max, 64);
    CU_ASSERT_STRING_EQUAL(type, "text/html");
    CU_ASSERT_EQUAL(workflow_observed(wf, "nope", &max, &type), 0);
    const json_t *mail = workflow_live_tool(wf, "mail");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mail);
    CU_ASSERT_STRING_EQUAL(workflow_argument_role(mail, "to"), "control");
    CU_ASSERT_STRING_EQUAL(workflow_argument_role(mail, "body"), "data");
    CU_ASSERT_PTR_NULL(workflow_argument_role(mail, "cc"));
    CU_ASSERT_PTR_NULL(workflow_live_tool(wf, "read_source"));
    /* The seed gives an observed resource no content: a host reads it at run time. */
    json_t *seed = workflow_seed_json(wf);
    json_t *r0 = json_array_get(json_object_get(seed, "resources"), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r0, "content")), "");
    json_decref(seed);
    workflow_free(wf);
}

static void test_destination_classes_match_in_definition_order(void)
{
    workflow *wf = load_ok(LIVE_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    int cl = -1;
    CU_ASSERT_STRING_EQUAL(workflow_match_destination(wf, "ann@corp.example", &cl), "corp");
    CU_ASSERT_EQUAL(cl, 1);
    CU_ASSERT_STRING_EQUAL(workflow_match_destination(wf, "DE89370400440532013000", &cl), "saved");
    CU_ASSERT_EQUAL(cl, 2);
    CU_ASSERT_STRING_EQUAL(workflow_match_destination(wf, "attacker@evil.example", &cl), "anyone");
    CU_ASSERT_EQUAL(cl, 0);
    /* A pattern matches the whole value, not a part of it; a listed value exactly. */
    CU_ASSERT_PTR_NULL(workflow_match_destination(wf, "not an address", &cl));
    CU_ASSERT_PTR_NULL(workflow_match_destination(wf, "DE89370400440532013000 ", &cl));
    CU_ASSERT_PTR_NULL(workflow_match_destination(wf, "a@b c@d", &cl));
    workflow_free(wf);
}

/* A suffix or values class stands for one address: a list, a display name, whitespace or a
 * control character matches neither (here no class at all: the pattern class takes no space). */
static void test_suffix_and_values_classes_stand_for_one_address(void)
{
    workflow *wf = load_ok(LIVE_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    int cl = -1;
    const char *lists[] = {"billing@stadtwerke.example; ann@corp.example",
                           "x@evil.example,ann@corp.example",
                           "<ann@corp.example>",
                           "\"Ann\"ann@corp.example",
                           "\nann@corp.example",
                           "\tann@corp.example",
                           "\xc2\xa0"
                           "ann@corp.example",
                           "\xc2\x85"
                           "ann@corp.example"};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        const char *c = workflow_match_destination(wf, lists[i], &cl);
        CU_ASSERT_TRUE(c == NULL || strcmp(c, "corp") != 0);
    }
    CU_ASSERT_PTR_NULL(workflow_match_destination(wf, "DE89370400440532013000\n", &cl));
    CU_ASSERT_STRING_EQUAL(workflow_match_destination(wf, "ann@corp.example", &cl), "corp");
    workflow_free(wf);
}

/* Containment is of whole tokens: joiners (-_.@/+,) between letters or digits stay inside. */
static void test_token_containment(void)
{
    const char *bill = "Stadtwerke, bill INV-7731. Amount due: 84.20 EUR. Pay to IBAN "
                       "DE89370400440532013000. Questions: billing@stadtwerke.example; ann";
    CU_ASSERT_TRUE(token_holds(bill, "DE89370400440532013000"));
    CU_ASSERT_TRUE(token_holds(bill, "INV-7731"));
    CU_ASSERT_TRUE(token_holds(bill, "84.20"));
    CU_ASSERT_TRUE(token_holds(bill, "84.20 EUR"));
    CU_ASSERT_TRUE(token_holds(bill, "billing@stadtwerke.example"));
    CU_ASSERT_TRUE(token_holds(bill, "Stadtwerke"));
    CU_ASSERT_TRUE(token_holds(bill, "ann"));
    CU_ASSERT_FALSE(token_holds(bill, "7731"));
    CU_ASSERT_FALSE(token_holds(bill, "2013000"));
    CU_ASSERT_FALSE(token_holds(bill, "DE8937"));
    CU_ASSERT_FALSE(token_holds(bill, "84"));
    CU_ASSERT_FALSE(token_holds(bill, "20"));
    CU_ASSERT_FALSE(token_holds(bill, "stadtwerke.example"));
    CU_ASSERT_FALSE(token_holds(bill, "billing"));
    CU_ASSERT_FALSE(token_holds(bill, "Stadt"));
    CU_ASSERT_FALSE(token_holds(bill, ""));
    CU_ASSERT_FALSE(token_holds(NULL, "x"));
    /* A later occurrence counts when the first is a fragment. */
    CU_ASSERT_TRUE(token_holds("A7731 7731", "7731"));
    /* A multi-byte character is part of its word. */
    CU_ASSERT_FALSE(token_holds("M\xc3\xbcller", "ller"));
}

static void test_payments_reference_workflow_is_valid(void)
{
    workflow *wf = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL(workflow_load_file(PAYMENTS_PATH, &wf, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    const json_t *pay = workflow_live_tool(wf, "send_money");
    CU_ASSERT_STRING_EQUAL(workflow_argument_role(pay, "iban"), "control");
    CU_ASSERT_STRING_EQUAL(workflow_argument_role(pay, "amount"), "control");
    CU_ASSERT_STRING_EQUAL(workflow_argument_role(pay, "reference"), "data");
    int cl = -1;
    CU_ASSERT_STRING_EQUAL(workflow_match_destination(wf, "GB33BUKB20201555555555", &cl),
                           "payee_any");
    workflow_free(wf);
}

static void test_observed_resource_rules(void)
{
    expect_refused(LIVE("{'id':'page','title':'P','confidentiality':'public','integrity':"
                        "'untrusted','content':'x','observed':{'max_bytes':4}}",
                        RCP_LIVE, TOOL_MAIL),
                   "resources[0]: needs exactly one of content and observed");
    expect_refused(LIVE("{'id':'page','title':'P','confidentiality':'public','integrity':"
                        "'untrusted'}",
                        RCP_LIVE, TOOL_MAIL),
                   "resources[0].content: required field is missing");
    expect_refused(LIVE("{'id':'page','title':'P','confidentiality':'public','integrity':"
                        "'untrusted','observed':{'max_bytes':0}}",
                        RCP_LIVE, TOOL_MAIL),
                   "resources[0].observed.max_bytes: 0 is outside 1..1048576 bytes");
    expect_refused(LIVE("{'id':'page','title':'P','confidentiality':'public','integrity':"
                        "'untrusted','observed':{'max_bytes':9,'content_type':'html'}}",
                        RCP_LIVE, TOOL_MAIL),
                   "resources[0].observed.content_type: \"html\" is not a media type like "
                   "\"text/plain\"");
    expect_refused(LIVE("{'id':'page','title':'P','confidentiality':'public','integrity':"
                        "'untrusted','observed':{'max_bytes':9,'labels':'trusted'}}",
                        RCP_LIVE, TOOL_MAIL),
                   "resources[0].observed.labels: unknown field");
}

static void test_observed_resource_is_not_a_step_read(void)
{
    char *def = strdup(LIVE_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(def);
    char *reads = strstr(def, "'reads':[]");
    CU_ASSERT_PTR_NOT_NULL_FATAL(reads);
    size_t n = strlen(def) + 16;
    char *edited = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(edited);
    snprintf(edited, n, "%.*s'reads':['page']%s", (int)(reads - def), def,
             reads + strlen("'reads':[]"));
    expect_refused(edited, "steps[0].reads: \"page\" is an observed resource: a host records "
                           "what it read with ObserveSource");
    free(edited);
    free(def);
}

/* LIVE_OK with script (a JSON object, ' for ") as its step's script, and the expect list
 * expect (NULL: none). Caller frees. */
static char *with_script(const char *script, const char *expect)
{
    const char *def = LIVE_OK;
    const char *at = strstr(def, "'output_title':'Out'}");
    size_t n = strlen(def) + strlen(script) + (expect ? strlen(expect) : 0) + 64;
    char *out = malloc(n);
    if (at == NULL || out == NULL) {
        free(out);
        return NULL;
    }
    size_t head = (size_t)(at - def) + strlen("'output_title':'Out'");
    int w = snprintf(out, n, "%.*s,'script':%s%s", (int)head, def, script, def + head);
    if (expect != NULL && w > 0) {
        snprintf(out + w - 1, n - (size_t)w + 1, ",'expect':%s}", expect);
    }
    return out;
}

#define OBS_PAGE "{'resource':'page','locator':'https://shop.example/a','content':'A page.'}"
#define TO_TASK "{'name':'to','value':'ann@corp.example','from_task':true}"
#define BODY_MODEL "{'name':'body','value':'A summary.'}"

static void script_refused(const char *script, const char *expect)
{
    char *def = with_script(script, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(def);
    expect_refused(def, expect);
    free(def);
}

/* A scripted run's observations and tool calls: what the built-in runner observes and invokes
 * in the step; each mistake is refused at load time with its path. */
static void test_scripted_observations_and_invocations(void)
{
    char *def =
        with_script("{'content':'A summary.','observe':[" OBS_PAGE "],'invoke':[{'tool':'mail',"
                    "'arguments':[" TO_TASK "," BODY_MODEL "]},{'tool':'mail','arguments':"
                    "[{'name':'to','value':'a@b.example','quoted_from':'page'}]}]}",
                    "[{'step':'s','event':'source_observed','outcome':'allow'},"
                    "{'step':'s','event':'invoke_decided','outcome':'deny','codes':"
                    "['CONTROL_UNTRUSTED']}]");
    CU_ASSERT_PTR_NOT_NULL_FATAL(def);
    workflow *wf = load_ok(def);
    CU_ASSERT_PTR_NOT_NULL(wf);
    workflow_free(wf);
    free(def);
    script_refused("{'content':'x','observe':[{'resource':'nosuch','locator':'l','content':'c'}]}",
                   "steps[0].script.observe[0].resource: \"nosuch\" is not an observed resource");
    script_refused("{'content':'x','observe':[{'resource':'page','locator':'l','content':'"
                   "0123456789012345678901234567890123456789012345678901234567890123X'}]}",
                   "steps[0].script.observe[0].content: 65 bytes, at most 64 (limit)");
    script_refused("{'content':'x','observe':[" OBS_PAGE "," OBS_PAGE "]}",
                   "steps[0].script.observe[1].resource: \"page\" is observed twice in the script");
    script_refused("{'content':'x','observe':[{'resource':'page','locator':'','content':'c'}]}",
                   "steps[0].script.observe[0].locator: must not be empty");
    script_refused(
        "{'content':'x','observe':[{'resource':'page','locator':'a\\nb','content':'c'}]}",
        "steps[0].script.observe[0].locator: holds a control character (where the "
        "bytes were read is one line)");
    script_refused("{'content':'x','invoke':[{'tool':'read_source','arguments':[]}]}",
                   "steps[0].script.invoke[0].tool: \"read_source\" is not a tool with arguments");
    script_refused("{'content':'x','invoke':[{'tool':'mail','arguments':[{'name':'cc','value':"
                   "'a'}]}]}",
                   "steps[0].script.invoke[0].arguments[0].name: the tool declares no argument "
                   "\"cc\"");
    script_refused("{'content':'x','observe':[" OBS_PAGE "],'invoke':[{'tool':'mail','arguments':"
                   "[{'name':'to','value':'a','from_task':true,'quoted_from':'page'}]}]}",
                   "steps[0].script.invoke[0].arguments[0]: has both from_task and quoted_from: "
                   "a value comes from one place");
    script_refused("{'content':'x','invoke':[{'tool':'mail','arguments':[{'name':'to','value':"
                   "'a','quoted_from':'page'}]}]}",
                   "steps[0].script.invoke[0].arguments[0].quoted_from: \"page\" is neither read "
                   "nor observed by the step");
    script_refused("{'content':'x','invoke':[{'tool':'mail','arguments':[{'name':'to','value':"
                   "'a','from_task':false}]}]}",
                   "steps[0].script.invoke[0].arguments[0].from_task: must be true (leave it out "
                   "for a value the model wrote)");
    script_refused("{'content':'A summary of 7731.','invoke':[{'tool':'mail','arguments':["
                   "{'name':'to','value':'ann@corp.example','from_task':true},"
                   "{'name':'body','value':'summary of 77'}]}]}",
                   "steps[0].script.invoke[0].arguments[1].value: the script's content (the "
                   "model's output, this value's lineage) does not hold it as a token: write it "
                   "into the content, or name its origin");
}

static void test_destination_class_rules(void)
{
    expect_refused(LIVE(R_PAGE, "{'id':'corp','clearance':'internal','match':{'pattern':'([a-z'}}",
                        TOOL_FETCH),
                   "recipients[0].match.pattern: \"([a-z\" is not a POSIX extended regular "
                   "expression");
    expect_refused(
        LIVE(R_PAGE, "{'id':'corp','clearance':'internal','match':{'suffix':'x','values':['y']}}",
             TOOL_FETCH),
        "recipients[0].match: needs exactly one of suffix, values and pattern");
    expect_refused(
        LIVE(R_PAGE, "{'id':'corp','clearance':'internal','match':{'values':[]}}", TOOL_FETCH),
        "recipients[0].match.values: 1..256 values");
    expect_refused(LIVE(R_PAGE, "{'id':'corp','clearance':'internal','match':{'values':['a','a']}}",
                        TOOL_FETCH),
                   "recipients[0].match.values[1]: is listed twice");
    expect_refused(
        LIVE(R_PAGE, "{'id':'corp','clearance':'internal','match':{'suffix':''}}", TOOL_FETCH),
        "recipients[0].match.suffix: must not be empty");
    /* JSON's escaped NUL is refused before any rule: a value cut at it would match what it
     * does not say. */
    char *json = dq(LIVE(
        R_PAGE, "{'id':'corp','clearance':'internal','match':{'suffix':'a\\u0000b'}}", TOOL_FETCH));
    workflow *wf = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL(workflow_load_buffer(json, strlen(json), &wf, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "definition: not valid JSON"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "\\u0000 is not allowed"));
    free(json);
}

static void test_tool_argument_rules(void)
{
    expect_refused(LIVE(R_PAGE, RCP_LIVE,
                        "'mail':{'arguments':[{'name':'to','role':'boss'}],'destination':'to'}"),
                   "tools.mail.arguments[0].role: \"boss\" is not one of data, control");
    /* An argument with no declared role is refused: a role is never guessed. */
    expect_refused(LIVE(R_PAGE, RCP_LIVE, "'mail':{'arguments':[{'name':'to'}]}"),
                   "tools.mail.arguments[0].role: required field is missing");
    expect_refused(LIVE(R_PAGE, RCP_LIVE,
                        "'mail':{'arguments':[{'name':'to','role':'control'},"
                        "{'name':'to','role':'data'}],'destination':'to'}"),
                   "tools.mail.arguments[1]: argument \"to\" is declared twice");
    expect_refused(LIVE(R_PAGE, RCP_LIVE, "'mail':{'arguments':[{'name':'body','role':'data'}]}"),
                   "tools.mail.destination: a tool with a data argument names the control "
                   "argument its destination is matched from");
    expect_refused(LIVE(R_PAGE, RCP_LIVE,
                        "'mail':{'arguments':[{'name':'to','role':'control'},"
                        "{'name':'body','role':'data'}],'destination':'body'}"),
                   "tools.mail.destination: \"body\" is not a control argument of the tool");
    expect_refused(LIVE(R_PAGE, RCP_LIVE,
                        "'fetch':{'arguments':[{'name':'url','role':'control'}],'result':'nope'}"),
                   "tools.fetch.result: \"nope\" is not an observed resource");
    expect_refused(LIVE(R_PAGE, RCP_LIVE, "'mail':{'effect':true}"),
                   "tools.mail.arguments: required field is missing (effect, destination, "
                   "clearance, result, server and downstream_tool are for a tool with "
                   "arguments)");
    expect_refused(LIVE(R_PAGE, RCP_LIVE, "'mail':{'clearance':'internal'}"),
                   "tools.mail.arguments: required field is missing (effect, destination, "
                   "clearance, result, server and downstream_tool are for a tool with "
                   "arguments)");
    /* A tool's own clearance is where a tool without a destination sends its values; one
     * with a destination is held to the class matched, and a second clearance is refused. */
    expect_refused(LIVE(R_PAGE, RCP_LIVE,
                        "'fetch':{'arguments':[{'name':'url','role':'control'}],"
                        "'clearance':'secret'}"),
                   "tools.fetch.clearance: \"secret\" is not one of public, internal, "
                   "confidential");
    expect_refused(LIVE(R_PAGE, RCP_LIVE,
                        "'mail':{'arguments':[{'name':'to','role':'control'}],"
                        "'destination':'to','clearance':'public'}"),
                   "tools.mail.clearance: a tool with a destination sends its values to the "
                   "destination class matched, whose clearance holds them");
    expect_refused(LIVE(R_PAGE, RCP_LIVE, "'mail':{}"),
                   "tools.mail.approval: required field is missing");
}

/* A definition with downstream MCP servers: LIVE's, with servers and the tools mapped. */
#define GW(servers, tools)                                                                         \
    "{'name':'live','task':'Mail the page.','resources':[" R_PAGE "],'recipients':[" RCP_LIVE      \
    "],'actors':[{'id':'h','kind':'human'}],'grants':[" GRANT_LIVE "],'steps':[" STEP_LIVE         \
    "],'servers':{" servers "},'tools':{" tools "}}"
#define SRV_MAIL "'mailer':{'command':'node','args':['mail.js'],'env_from':['MAIL_TOKEN']}"
#define TOOL_MAIL_MAPPED                                                                           \
    "'mail':{'arguments':[{'name':'to','role':'control'},{'name':'body','role':'data'}],"          \
    "'destination':'to','effect':true,'server':'mailer','downstream_tool':'send_email'}"

/* Tools mapped onto a downstream server's tools: the server is named in "servers", with its
 * command, arguments and the names (never the values) of the variables it is given. */
static void test_downstream_servers_and_mapped_tools(void)
{
    workflow *wf = load_ok(GW(SRV_MAIL ",'files':{'command':'npx','timeout_ms':5000}",
                              TOOL_MAIL_MAPPED ",'fetch':{'arguments':[{'name':'url','role':"
                                               "'control'}],'result':'page','server':'files',"
                                               "'downstream_tool':'read_text_file'}"));
    CU_ASSERT_PTR_NOT_NULL(wf);
    workflow_free(wf);
    expect_refused(GW(SRV_MAIL, "'mail':{'arguments':[{'name':'to','role':'control'}],"
                                "'destination':'to','server':'nosuch','downstream_tool':'x'}"),
                   "tools.mail.server: \"nosuch\" is not one of the definition's servers");
    expect_refused(GW(SRV_MAIL, "'mail':{'arguments':[{'name':'to','role':'control'}],"
                                "'destination':'to','server':'mailer'}"),
                   "tools.mail.downstream_tool: required field is missing (a tool of a server "
                   "names both server and downstream_tool)");
    expect_refused(GW(SRV_MAIL, "'mail':{'arguments':[{'name':'to','role':'control'}],"
                                "'destination':'to','server':'mailer','downstream_tool':'a b'}"),
                   "tools.mail.downstream_tool: \"a b\" is not a tool name (1..128 characters "
                   "of A-Z a-z 0-9 _ - . /)");
    expect_refused(GW(SRV_MAIL, "'mail':{'server':'mailer','downstream_tool':'send_email'}"),
                   "tools.mail.arguments: required field is missing (effect, destination, "
                   "clearance, result, server and downstream_tool are for a tool with "
                   "arguments)");
    /* Credentials never sit in the definition: env_from takes names, and only names. */
    expect_refused(GW("'m':{'command':'node','env_from':['TOKEN=abc']}", TOOL_MAIL),
                   "servers.m.env_from[0]: \"TOKEN=abc\" is not an environment variable name");
    expect_refused(GW("'m':{'command':'node','env':{'TOKEN':'abc'}}", TOOL_MAIL),
                   "servers.m.env: unknown field");
    expect_refused(GW("'m':{'command':''}", TOOL_MAIL), "servers.m.command: must not be empty");
    expect_refused(GW("'m':{'command':'node','args':[1]}", TOOL_MAIL),
                   "servers.m.args[0]: must be a string");
    expect_refused(GW("'m':{'command':'node','timeout_ms':0}", TOOL_MAIL),
                   "servers.m.timeout_ms: 0 is not from 1 to 600000 (milliseconds)");
    expect_refused(
        GW("'m n':{'command':'node'}", TOOL_MAIL),
        "servers.m n: \"m n\" is not a valid id (1..64 characters of A-Z a-z 0-9 . _ -)");
}

/* A server spoken to over Streamable HTTP: a url (http or https, no credential in it) and
 * where charter-mcp finds its bearer token; the fields of a command's server are refused. */
static void test_downstream_http_servers(void)
{
    workflow *wf = load_ok(GW("'mailer':{'url':'http://127.0.0.1:8080/mcp','credential_env':"
                              "'MAIL_TOKEN','timeout_ms':5000},'files':{'url':'https://files."
                              "example/mcp','credential_file':'/etc/charter/files.token'},"
                              "'open':{'url':'HTTP://[::1]:9/'}",
                              TOOL_MAIL_MAPPED));
    CU_ASSERT_PTR_NOT_NULL(wf);
    workflow_free(wf);
    expect_refused(GW("'m':{'url':'http://h/mcp','command':'node'}", TOOL_MAIL),
                   "servers.m.url: a server has a command or a url, not both");
    expect_refused(GW("'m':{'timeout_ms':5}", TOOL_MAIL),
                   "servers.m.command: required field is missing (a server has a command, run "
                   "over stdio, or a url, spoken to over Streamable HTTP)");
    expect_refused(GW("'m':{'url':'ftp://h/mcp'}", TOOL_MAIL),
                   "servers.m.url: \"ftp://h/mcp\" is not an http:// or https:// URL");
    expect_refused(GW("'m':{'url':'file:///etc/passwd'}", TOOL_MAIL),
                   "servers.m.url: \"file:///etc/passwd\" is not an http:// or https:// URL");
    expect_refused(GW("'m':{'url':'http:///mcp'}", TOOL_MAIL),
                   "servers.m.url: \"http:///mcp\" names no host");
    expect_refused(GW("'m':{'url':'http://h/a b'}", TOOL_MAIL),
                   "servers.m.url: \"http://h/a b\" holds a space or a character outside "
                   "printable ASCII");
    expect_refused(GW("'m':{'url':'http://me:secret@h/mcp'}", TOOL_MAIL),
                   "servers.m.url: holds a user or password: name the credential with "
                   "credential_env or credential_file, never in the definition");
    expect_refused(GW("'m':{'url':'http://h/mcp','env_from':['PATH']}", TOOL_MAIL),
                   "servers.m.env_from: is for a server with a command");
    expect_refused(GW("'m':{'command':'node','credential_env':'TOKEN'}", TOOL_MAIL),
                   "servers.m.credential_env: is for a server with a url");
    expect_refused(
        GW("'m':{'url':'http://h/','credential_env':'T','credential_file':'/t'}", TOOL_MAIL),
        "servers.m.credential_file: a server names credential_env or "
        "credential_file, not both");
    expect_refused(GW("'m':{'url':'http://h/','credential_env':'Bearer abc'}", TOOL_MAIL),
                   "servers.m.credential_env: \"Bearer abc\" is not an environment variable "
                   "name");
    expect_refused(GW("'m':{'url':'http://h/','credential_file':'token.txt'}", TOOL_MAIL),
                   "servers.m.credential_file: \"token.txt\" is not an absolute path");
    expect_refused(GW("'m':{'url':'http://h/','token':'abc'}", TOOL_MAIL),
                   "servers.m.token: unknown field");
    expect_refused(GW("'m':{'url':'http://h/','headers':{'Authorization':'Bearer x'}}", TOOL_MAIL),
                   "servers.m.headers: unknown field");
}

/* charter's own credentials (CHARTER_TOKEN, CHARTER_OPERATOR_TOKEN, ...) never go to a
 * downstream server: neither a command's env_from nor a url's credential_env may name them. */
static void test_downstream_servers_never_get_charters_own_variables(void)
{
    expect_refused(GW("'m':{'command':'node','env_from':['PATH','CHARTER_TOKEN']}", TOOL_MAIL),
                   "servers.m.env_from[1]: \"CHARTER_TOKEN\" is one of charter's own variables "
                   "(CHARTER_*), never handed to a server");
    expect_refused(
        GW("'m':{'url':'http://h/','credential_env':'CHARTER_OPERATOR_TOKEN'}", TOOL_MAIL),
        "servers.m.credential_env: \"CHARTER_OPERATOR_TOKEN\" is one of charter's "
        "own variables (CHARTER_*), never sent to a server");
    workflow *wf =
        load_ok(GW("'m':{'url':'http://h/','credential_env':'MY_CHARTER_TOKEN'}", TOOL_MAIL));
    CU_ASSERT_PTR_NOT_NULL(wf);
    workflow_free(wf);
}

#define T(fn)                                                                                      \
    {                                                                                              \
#fn, fn                                                                                    \
    }
static const harness_test tests[] = {
    T(test_live_definition_loads_with_observed_resource_classes_and_tools),
    T(test_destination_classes_match_in_definition_order),
    T(test_suffix_and_values_classes_stand_for_one_address),
    T(test_token_containment),
    T(test_payments_reference_workflow_is_valid),
    T(test_observed_resource_rules),
    T(test_observed_resource_is_not_a_step_read),
    T(test_scripted_observations_and_invocations),
    T(test_destination_class_rules),
    T(test_tool_argument_rules),
    T(test_downstream_servers_and_mapped_tools),
    T(test_downstream_http_servers),
    T(test_downstream_servers_never_get_charters_own_variables),
};
#undef T

static const harness_suite suites[] = {
    {"live_tools", NULL, NULL, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
