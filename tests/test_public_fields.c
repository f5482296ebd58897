/*
 * test_public_fields.c - RecordOutput with fields, through a real charterd on the test Redis:
 * a public step's output sent as fields is rendered by the server from the step's template
 * (the words of the template and the allowed values only), and an off-list value, fields with
 * content, or fields on a step without public rendering are INVALID_ARGUMENT with nothing
 * written and no echo of what was sent. charter-mcp relies on this for public steps.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"

static char graph[64];
static harness_charterd daemon_;
static charter_client *op;
static char run_id[130], research_out[130], report_ctx[130], research_ctx[130];

static int suite_init(void)
{
    harness_graph_name(graph, sizeof graph, "pubfields");
    store *st = harness_store_open(graph);
    store_close(st);
    harness_charterd_opts o = {.graph = graph};
    if (harness_charterd_start(&o, &daemon_) != 0)
        return -1;
    return harness_client_open(daemon_.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &op);
}

static int suite_clean(void)
{
    charter_client_close(op);
    int rc = harness_charterd_stop(&daemon_);
    harness_graph_drop(graph);
    return rc == 0 ? 0 : -1;
}

/* An external run whose research step has read vendor_a and recorded a summary from it. */
static void setup(void)
{
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    Charter__V1__RunView *v = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(op, &cr, &v, NULL), 0);
    snprintf(run_id, sizeof run_id, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    CU_ASSERT_EQUAL_FATAL(harness_open_step(op, run_id, "research", research_ctx), 0);
    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = research_ctx;
    rs.resource_id = "vendor_a";
    Charter__V1__ReadSourceResponse *src = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_read_source(op, &rs, &src, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(src->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    ro.context_id = research_ctx;
    ro.input_ids = &src->artifact->id;
    ro.n_input_ids = 1;
    ro.title = "Research summary";
    ro.content = "Northwind 389 USD per desk.";
    Charter__V1__RecordOutputResponse *out = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_record_output(op, &ro, &out, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(out->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    snprintf(research_out, sizeof research_out, "%s", out->artifact->id);
    charter__v1__record_output_response__free_unpacked(out, NULL);
    charter__v1__read_source_response__free_unpacked(src, NULL);
    CU_ASSERT_EQUAL_FATAL(harness_open_step(op, run_id, "report", report_ctx), 0);
}

/* RecordOutput in ctx from research_out with the three public fields (recommended, fastest,
 * longest) and content. */
static int record(const char *ctx, const char *recommended, const char *content,
                  Charter__V1__RecordOutputResponse **out, charter_status *st)
{
    Charter__V1__RecordOutputRequest__FieldsEntry e[3];
    Charter__V1__RecordOutputRequest__FieldsEntry *f[3] = {&e[0], &e[1], &e[2]};
    const char *names[3] = {"recommended_vendor", "fastest_delivery", "longest_warranty"};
    const char *values[3] = {recommended, "vendor_b", "vendor_b"};
    for (int i = 0; i < 3; i++) {
        charter__v1__record_output_request__fields_entry__init(&e[i]);
        e[i].key = (char *)names[i];
        e[i].value = (char *)values[i];
    }
    char *ids[1] = {research_out};
    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    ro.context_id = (char *)ctx;
    ro.input_ids = ids;
    ro.n_input_ids = 1;
    ro.title = "Public vendor comparison";
    ro.content = (char *)content;
    ro.fields = f;
    ro.n_fields = 3;
    return charter_record_output(op, &ro, out, st);
}

static void test_fields_are_rendered_by_the_server_from_the_template(void)
{
    setup();
    Charter__V1__RecordOutputResponse *out = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(record(report_ctx, "vendor_b", "", &out, &st), 0);
    CU_ASSERT_EQUAL(out->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_STRING_EQUAL(out->artifact->content,
                           "Public vendor comparison for 120 standing desks. Vendors compared: "
                           "vendor_a, vendor_b, vendor_c. Recommended: vendor_b. Fastest "
                           "delivery: vendor_b. Longest warranty: vendor_b.");
    CU_ASSERT_EQUAL(out->artifact->n_parents, 1);
    charter__v1__record_output_response__free_unpacked(out, NULL);
}

static void test_off_list_value_is_invalid_and_writes_nothing(void)
{
    char before[65], after[65];
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(graph, before), 0);
    Charter__V1__RecordOutputResponse *out = NULL;
    charter_status st;
    CU_ASSERT_EQUAL(record(report_ctx, "CEILING-48200", "", &out, &st), -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(out);
    CU_ASSERT_PTR_NULL(strstr(st.message, "CEILING"));
    CU_ASSERT_EQUAL(record(report_ctx, "vendor_b", "the budget is 48,200", &out, &st),
                    -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(strstr(st.message, "48,200"));
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(graph, after), 0);
    CU_ASSERT_STRING_EQUAL(before, after);
}

static void test_fields_on_a_step_without_public_rendering_are_invalid(void)
{
    Charter__V1__RecordOutputResponse *out = NULL;
    charter_status st;
    CU_ASSERT_EQUAL(record(research_ctx, "vendor_b", "", &out, &st), -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(out);
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test tests[] = {
    {"fields are rendered by the server from the template",
     test_fields_are_rendered_by_the_server_from_the_template},
    {"an off-list value is invalid and writes nothing",
     test_off_list_value_is_invalid_and_writes_nothing},
    {"fields on a step without public rendering are invalid",
     test_fields_on_a_step_without_public_rendering_are_invalid},
};
static const harness_suite suites[] = {
    {"RecordOutput with fields", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
