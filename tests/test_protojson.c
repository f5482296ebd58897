/*
 * test_protojson.c - the proto3 JSON mapping (proto/protojson.c) over real charter.v1 messages
 * and over tests/protojson_test.proto, which holds the field shapes charter.v1 lacks.
 *
 * Each case writes the expected JSON text or the expected error line by hand: round trips of a
 * DeliverRequest, a DeliverResponse with its Decision and Delivery, a Receipt, an RpcRequest's
 * map, repeated fields, enums, bytes and 64-bit integers; then one case per error class.
 * Decoding goes through a counting allocator so every case also checks that nothing leaks.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "charter.pb-c.h"
#include "protojson.h"
#include "protojson_test.pb-c.h"
#include "suite.h"

/* --- a counting allocator: every decode must free what it allocated ----------------------- */

typedef struct {
    long live;
    size_t budget; /* 0: unlimited */
    size_t used;
} counting;

static void *counting_alloc(void *data, size_t size)
{
    counting *c = data;
    if (c->budget > 0 && c->used + size > c->budget) {
        return NULL;
    }
    size_t *p = malloc(size + sizeof(size_t) * 2);
    if (p == NULL) {
        return NULL;
    }
    p[0] = size;
    c->used += size;
    c->live++;
    return p + 2;
}

static void counting_free(void *data, void *ptr)
{
    counting *c = data;
    if (ptr == NULL) {
        return;
    }
    size_t *p = (size_t *)ptr - 2;
    c->used -= p[0];
    c->live--;
    free(p);
}

static counting g_count;
static ProtobufCAllocator g_alloc = {counting_alloc, counting_free, &g_count};

/* Decodes json as desc; returns the status, the message in *out, the error in err. */
static int decode(const ProtobufCMessageDescriptor *desc, const char *json, ProtobufCMessage **out,
                  char *err, size_t errlen)
{
    return protojson_decode(desc, json, strlen(json), &g_alloc, NULL, out, err, errlen);
}

static void release(ProtobufCMessage *m)
{
    protobuf_c_message_free_unpacked(m, &g_alloc);
    CU_ASSERT_EQUAL(g_count.live, 0);
}

/* Encodes m and compares with the expected text. */
static void expect_json(const ProtobufCMessage *m, const char *want)
{
    char *text = NULL;
    char err[256];
    int rc = protojson_encode_text(m, NULL, &text, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PROTOJSON_OK);
    if (text == NULL) {
        return;
    }
    if (strcmp(text, want) != 0) {
        fprintf(stderr, "\n  got  %s\n  want %s\n", text, want);
    }
    CU_ASSERT_STRING_EQUAL(text, want);
    free(text);
}

/* Decodes json, encodes the message back and requires want (the canonical form), then packs,
 * unpacks and encodes again, which must give want once more (JSON -> binary -> JSON). */
static void round_trip(const ProtobufCMessageDescriptor *desc, const char *json, const char *want)
{
    ProtobufCMessage *m = NULL;
    char err[256] = "";
    int rc = decode(desc, json, &m, err, sizeof err);
    if (rc != PROTOJSON_OK) {
        fprintf(stderr, "\n  decode failed: %s\n", err);
    }
    CU_ASSERT_EQUAL_FATAL(rc, PROTOJSON_OK);
    CU_ASSERT_TRUE(protobuf_c_message_check(m));
    expect_json(m, want);
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    CU_ASSERT_EQUAL(protobuf_c_message_pack(m, buf), n);
    ProtobufCMessage *back = protobuf_c_message_unpack(desc, NULL, n, buf);
    free(buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    expect_json(back, want);
    protobuf_c_message_free_unpacked(back, NULL);
    release(m);
}

/* Decoding json must fail with status and exactly the message want. */
static void expect_error(const ProtobufCMessageDescriptor *desc, const char *json, int status,
                         const char *want)
{
    ProtobufCMessage *m = NULL;
    char err[256] = "";
    int rc = decode(desc, json, &m, err, sizeof err);
    CU_ASSERT_EQUAL(rc, status);
    CU_ASSERT_PTR_NULL(m);
    if (strcmp(err, want) != 0) {
        fprintf(stderr, "\n  error got  %s\n  error want %s\n", err, want);
    }
    CU_ASSERT_STRING_EQUAL(err, want);
    CU_ASSERT_EQUAL(g_count.live, 0);
    if (m != NULL) {
        release(m);
    }
}

/* --- round trips over charter.v1 ---------------------------------------------------------- */

static void test_deliver_request_round_trips_with_camel_case_names(void)
{
    round_trip(&charter__v1__deliver_request__descriptor,
               "{\"contextId\":\"ctx-1\",\"payloadId\":\"a_report\",\"recipient\":\"public\","
               "\"tool\":\"publish\",\"invocationId\":\"inv:1\"}",
               "{\"contextId\":\"ctx-1\",\"payloadId\":\"a_report\",\"recipient\":\"public\","
               "\"tool\":\"publish\",\"invocationId\":\"inv:1\"}");
}

static void test_original_field_names_are_accepted_on_input(void)
{
    round_trip(&charter__v1__deliver_request__descriptor,
               "{\"context_id\":\"ctx-1\",\"invocation_id\":\"inv-2\"}",
               "{\"contextId\":\"ctx-1\",\"invocationId\":\"inv-2\"}");
}

static void test_deliver_response_with_decision_and_delivery_round_trips(void)
{
    round_trip(&charter__v1__deliver_response__descriptor,
               "{\"decision\":{\"outcome\":\"DENY\",\"codes\":[\"INPUT_OUT_OF_SCOPE\","
               "\"GRANT_INVALID\"],\"witness\":\"budget (confidential) \\u2192 report\"},"
               "\"delivery\":{\"invocationId\":\"inv-1\",\"grantChain\":[\"g_reporter\","
               "\"g_analyst\",\"g_root\"],\"committedAt\":1780000000.25,\"eventSeq\":\"42\"},"
               "\"acknowledged\":true}",
               "{\"decision\":{\"outcome\":\"DENY\",\"codes\":[\"INPUT_OUT_OF_SCOPE\","
               "\"GRANT_INVALID\"],\"witness\":\"budget (confidential) \xe2\x86\x92 report\"},"
               "\"delivery\":{\"invocationId\":\"inv-1\",\"grantChain\":[\"g_reporter\","
               "\"g_analyst\",\"g_root\"],\"committedAt\":1780000000.25,\"eventSeq\":\"42\"},"
               "\"acknowledged\":true}");
}

static void test_receipt_round_trips_with_uint64_as_string(void)
{
    round_trip(&charter__v1__receipt__descriptor,
               "{\"kind\":\"run\",\"runId\":\"r1\",\"status\":\"completed\",\"lastSeq\":"
               "9223372036854775807,\"deliveries\":[\"inv-1\",\"inv-2\"],\"mac\":\"ab12\"}",
               "{\"kind\":\"run\",\"runId\":\"r1\",\"status\":\"completed\",\"lastSeq\":"
               "\"9223372036854775807\",\"deliveries\":[\"inv-1\",\"inv-2\"],\"mac\":\"ab12\"}");
    /* Above 2^63 - 1 jansson reads no number: the canonical string form carries it. */
    round_trip(&charter__v1__receipt__descriptor, "{\"lastSeq\":\"18446744073709551615\"}",
               "{\"lastSeq\":\"18446744073709551615\"}");
}

static void test_rpc_request_map_and_bytes_round_trip(void)
{
    /* "hello" in URL-safe base64 without padding comes back as standard base64 with padding. */
    round_trip(&charter__v1__rpc_request__descriptor,
               "{\"method\":\"/charter.v1.Gate/Deliver\",\"payload\":\"aGVsbG8\","
               "\"metadata\":{\"authorization\":\"Bearer t\",\"x-request-id\":\"7\"},"
               "\"timeoutMs\":2500}",
               "{\"method\":\"/charter.v1.Gate/Deliver\",\"payload\":\"aGVsbG8=\","
               "\"metadata\":{\"authorization\":\"Bearer t\",\"x-request-id\":\"7\"},"
               "\"timeoutMs\":2500}");
}

static void test_defaults_are_omitted_and_null_means_default(void)
{
    round_trip(&charter__v1__deliver_response__descriptor,
               "{\"decision\":{\"outcome\":\"OUTCOME_UNSPECIFIED\",\"codes\":[],\"witness\":\"\"},"
               "\"delivery\":null,\"acknowledged\":false}",
               "{\"decision\":{}}");
    round_trip(&charter__v1__event__descriptor, "{\"seq\":\"0\",\"ts\":0,\"outcome\":0}", "{}");
}

static void test_enum_accepts_number_and_writes_name(void)
{
    round_trip(&charter__v1__decision__descriptor, "{\"outcome\":1}", "{\"outcome\":\"ALLOW\"}");
    /* An open proto3 enum keeps a number it has no name for. */
    round_trip(&charter__v1__decision__descriptor, "{\"outcome\":9}", "{\"outcome\":9}");
}

static void test_bytes_of_a_workflow_definition_survive_binary_content(void)
{
    Charter__V1__ApplyWorkflowRequest req = CHARTER__V1__APPLY_WORKFLOW_REQUEST__INIT;
    uint8_t raw[] = {0x00, 0xff, 0xfe, '{', '}', 0x80};
    req.definition.data = raw;
    req.definition.len = sizeof raw;
    expect_json(&req.base, "{\"definition\":\"AP/+e32A\"}");
    round_trip(&charter__v1__apply_workflow_request__descriptor, "{\"definition\":\"AP_-e32A\"}",
               "{\"definition\":\"AP/+e32A\"}");
}

/* --- the shapes charter.v1 lacks ---------------------------------------------------------- */

static void test_every_scalar_type_round_trips(void)
{
    round_trip(&pjtest__shapes__descriptor,
               "{\"i32\":-2147483648,\"s32\":-5,\"sf32\":7,\"u32\":4294967295,\"f32\":\"12\","
               "\"i64\":\"-9223372036854775808\",\"s64\":-3,\"sf64\":\"4\",\"u64\":\"5\","
               "\"f64\":6,\"fl\":1.5,\"db\":\"-Infinity\",\"flag\":true,\"text\":\"t\","
               "\"color\":\"GREEN\"}",
               "{\"i32\":-2147483648,\"s32\":-5,\"sf32\":7,\"u32\":4294967295,\"f32\":12,"
               "\"i64\":\"-9223372036854775808\",\"s64\":\"-3\",\"sf64\":\"4\",\"u64\":\"5\","
               "\"f64\":\"6\",\"fl\":1.5,\"db\":\"-Infinity\",\"flag\":true,\"text\":\"t\","
               "\"color\":\"GREEN\"}");
}

static void test_repeated_and_maps_with_integer_and_bool_keys(void)
{
    round_trip(&pjtest__shapes__descriptor,
               "{\"manyI64\":[1,\"-2\",3.0],\"colors\":[\"RED\",2],\"blobs\":[\"\",\"AQ==\"],"
               "\"byNumber\":{\"-1\":\"minus\",\"2\":\"two\"},"
               "\"byFlag\":{\"true\":{\"name\":\"yes\",\"children\":[{\"name\":\"c\"}]}},"
               "\"counts\":{\"a\":\"9007199254740993\"}}",
               "{\"manyI64\":[\"1\",\"-2\",\"3\"],\"colors\":[\"RED\",\"GREEN\"],"
               "\"blobs\":[\"\",\"AQ==\"],\"byNumber\":{\"-1\":\"minus\",\"2\":\"two\"},"
               "\"byFlag\":{\"true\":{\"name\":\"yes\",\"children\":[{\"name\":\"c\"}]}},"
               "\"counts\":{\"a\":\"9007199254740993\"}}");
}

static void test_oneof_member_is_written_even_at_its_default(void)
{
    round_trip(&pjtest__shapes__descriptor, "{\"choiceNumber\":0}", "{\"choiceNumber\":0}");
    round_trip(&pjtest__shapes__descriptor, "{\"choiceInner\":{\"name\":\"n\"}}",
               "{\"choiceInner\":{\"name\":\"n\"}}");
    round_trip(&pjtest__shapes__descriptor, "{\"choiceText\":null,\"choiceNumber\":3}",
               "{\"choiceNumber\":3}");
}

/* NaN is written; -0.0 of a field without presence is a default, as protobuf-c's binary form
 * (which does not write it) has it, so JSON -> binary -> JSON keeps the text. */
static void test_nan_is_kept_and_negative_zero_is_a_default(void)
{
    Pjtest__Shapes s = PJTEST__SHAPES__INIT;
    s.fl = NAN;
    s.db = -0.0;
    expect_json(&s.base, "{\"fl\":\"NaN\"}");
    round_trip(&pjtest__shapes__descriptor, "{\"db\":-0.0,\"fl\":\"NaN\"}", "{\"fl\":\"NaN\"}");
    round_trip(&charter__v1__grant__descriptor, "{\"validFrom\":-0.0,\"validTo\":-0}", "{}");
}

/* --- errors ------------------------------------------------------------------------------- */

static void test_unknown_field_is_named(void)
{
    expect_error(&charter__v1__deliver_request__descriptor, "{\"contextId\":\"c\",\"payload\":1}",
                 PROTOJSON_EINVAL, "payload: unknown field of charter.v1.DeliverRequest");
    expect_error(&charter__v1__deliver_response__descriptor,
                 "{\"decision\":{\"outcome\":\"DENY\",\"reason\":\"x\"}}", PROTOJSON_EINVAL,
                 "decision.reason: unknown field of charter.v1.Decision");
}

static void test_wrong_type_names_the_path(void)
{
    expect_error(&charter__v1__deliver_request__descriptor, "{\"contextId\":5}", PROTOJSON_EINVAL,
                 "contextId: expected a string, got a number");
    expect_error(&charter__v1__deliver_response__descriptor,
                 "{\"delivery\":{\"grantChain\":[\"g1\",true]}}", PROTOJSON_EINVAL,
                 "delivery.grantChain[1]: expected a string, got a boolean");
    expect_error(&charter__v1__deliver_response__descriptor, "{\"decision\":[]}", PROTOJSON_EINVAL,
                 "decision: expected an object (charter.v1.Decision), got an array");
    expect_error(&charter__v1__deliver_response__descriptor, "{\"acknowledged\":\"true\"}",
                 PROTOJSON_EINVAL, "acknowledged: expected a boolean, got a string");
    expect_error(&charter__v1__rpc_request__descriptor, "{\"metadata\":{\"a\":1}}",
                 PROTOJSON_EINVAL, "metadata[\"a\"]: expected a string, got a number");
    expect_error(&charter__v1__decision__descriptor, "[1]", PROTOJSON_EINVAL,
                 "expected an object (charter.v1.Decision), got an array");
}

static void test_out_of_range_numbers_are_refused(void)
{
    expect_error(&charter__v1__rpc_request__descriptor, "{\"timeoutMs\":4294967296}",
                 PROTOJSON_EINVAL, "timeoutMs: 4294967296 is out of range for uint32");
    expect_error(&charter__v1__rpc_request__descriptor, "{\"timeoutMs\":-1}", PROTOJSON_EINVAL,
                 "timeoutMs: -1 is out of range for uint32");
    expect_error(&charter__v1__receipt__descriptor, "{\"lastSeq\":\"18446744073709551616\"}",
                 PROTOJSON_EINVAL, "lastSeq: \"18446744073709551616\" is not a uint64");
    expect_error(&charter__v1__rpc_response__descriptor, "{\"code\":1.5}", PROTOJSON_EINVAL,
                 "code: int32 must be a whole number, got 1.5");
    expect_error(&pjtest__shapes__descriptor, "{\"fl\":1e39}", PROTOJSON_EINVAL,
                 "fl: 1e+39 is out of range for float");
}

static void test_bad_base64_is_refused(void)
{
    expect_error(&charter__v1__rpc_request__descriptor, "{\"payload\":\"aGV*bG8=\"}",
                 PROTOJSON_EINVAL, "payload: bad base64: character 3 is not base64");
    expect_error(&charter__v1__rpc_request__descriptor, "{\"payload\":\"aGVsb\"}", PROTOJSON_EINVAL,
                 "payload: bad base64: wrong length or padding");
    expect_error(&charter__v1__rpc_request__descriptor, "{\"payload\":\"a===\"}", PROTOJSON_EINVAL,
                 "payload: bad base64: wrong length or padding");
}

static void test_bad_enum_name_is_refused(void)
{
    expect_error(&charter__v1__decision__descriptor, "{\"outcome\":\"MAYBE\"}", PROTOJSON_EINVAL,
                 "outcome: \"MAYBE\" is not a value of enum charter.v1.Outcome");
}

static void test_duplicates_are_refused(void)
{
    expect_error(&charter__v1__deliver_request__descriptor,
                 "{\"contextId\":\"a\",\"context_id\":\"b\"}", PROTOJSON_EINVAL,
                 "contextId: given twice (as \"contextId\" and as \"context_id\")");
    expect_error(&charter__v1__deliver_request__descriptor, "{\"tool\":\"a\",\"tool\":\"b\"}",
                 PROTOJSON_EINVAL,
                 "invalid JSON at line 1 column 18: duplicate object key near '\"tool\"'");
    expect_error(&pjtest__shapes__descriptor, "{\"choiceText\":\"a\",\"choiceNumber\":1}",
                 PROTOJSON_EINVAL,
                 "choiceNumber: another member of its oneof (choice_text) is set already");
}

static void test_bad_json_is_refused_with_its_position(void)
{
    expect_error(&charter__v1__deliver_request__descriptor, "{\"contextId\":", PROTOJSON_EINVAL,
                 "invalid JSON at line 1 column 13: unexpected token near end of file");
    expect_error(&charter__v1__deliver_request__descriptor, "{} x", PROTOJSON_EINVAL,
                 "invalid JSON at line 1 column 4: end of file expected near 'x'");
}

static void test_depth_and_size_are_bounded(void)
{
    char deep[4096] = "";
    for (int i = 0; i < 40; i++) {
        strcat(deep, "{\"children\":[");
    }
    strcat(deep, "{}");
    for (int i = 0; i < 40; i++) {
        strcat(deep, "]}");
    }
    ProtobufCMessage *m = NULL;
    char err[256] = "";
    int rc = protojson_decode(&pjtest__inner__descriptor, deep, strlen(deep), &g_alloc, NULL, &m,
                              err, sizeof err);
    CU_ASSERT_EQUAL(rc, PROTOJSON_ELIMIT);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "nested deeper than 32 levels"));
    CU_ASSERT_EQUAL(g_count.live, 0);

    protojson_limits small = {16, 0};
    const char *text = "{\"contextId\":\"0123456789\"}";
    rc = protojson_decode(&charter__v1__deliver_request__descriptor, text, strlen(text), &g_alloc,
                          &small, &m, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PROTOJSON_ELIMIT);
    CU_ASSERT_STRING_EQUAL(err, "JSON of 26 bytes exceeds the 16 byte limit");
}

static void test_allocator_budget_failure_frees_the_partial_message(void)
{
    g_count.budget = 320;
    ProtobufCMessage *m = NULL;
    char err[256] = "";
    const char *text = "{\"deliveries\":[\"0123456789012345678901234567890123456789\","
                       "\"0123456789012345678901234567890123456789\","
                       "\"0123456789012345678901234567890123456789\","
                       "\"0123456789012345678901234567890123456789\"]}";
    int rc = decode(&charter__v1__receipt__descriptor, text, &m, err, sizeof err);
    g_count.budget = 0;
    CU_ASSERT_EQUAL(rc, PROTOJSON_ENOMEM);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "deliveries["));
    CU_ASSERT_EQUAL(g_count.live, 0);
}

static void test_json_names_follow_proto3(void)
{
    char out[64];
    CU_ASSERT_EQUAL(protojson_json_name("context_id", out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "contextId");
    CU_ASSERT_EQUAL(protojson_json_name("many_i64", out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "manyI64");
    CU_ASSERT_EQUAL(protojson_json_name("a_b_c", out, 4), 0);
    CU_ASSERT_STRING_EQUAL(out, "aBC");
    CU_ASSERT_EQUAL(protojson_json_name("a_b_c", out, 3), -1);
}

#define T(fn)                                                                                      \
    {                                                                                              \
#fn, fn                                                                                    \
    }
static const harness_test tests[] = {
    T(test_deliver_request_round_trips_with_camel_case_names),
    T(test_original_field_names_are_accepted_on_input),
    T(test_deliver_response_with_decision_and_delivery_round_trips),
    T(test_receipt_round_trips_with_uint64_as_string),
    T(test_rpc_request_map_and_bytes_round_trip),
    T(test_defaults_are_omitted_and_null_means_default),
    T(test_enum_accepts_number_and_writes_name),
    T(test_bytes_of_a_workflow_definition_survive_binary_content),
    T(test_every_scalar_type_round_trips),
    T(test_repeated_and_maps_with_integer_and_bool_keys),
    T(test_oneof_member_is_written_even_at_its_default),
    T(test_nan_is_kept_and_negative_zero_is_a_default),
    T(test_unknown_field_is_named),
    T(test_wrong_type_names_the_path),
    T(test_out_of_range_numbers_are_refused),
    T(test_bad_base64_is_refused),
    T(test_bad_enum_name_is_refused),
    T(test_duplicates_are_refused),
    T(test_bad_json_is_refused_with_its_position),
    T(test_depth_and_size_are_bounded),
    T(test_allocator_budget_failure_frees_the_partial_message),
    T(test_json_names_follow_proto3),
};

static const harness_suite suites[] = {
    {"protojson", NULL, NULL, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
