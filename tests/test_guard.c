/*
 * test_guard.c - the policy evaluator over hand-built facts, no database.
 *
 * Facts are those of the reference workflow (deploy/workflows/procurement.json): three public,
 * untrusted vendor pages, the confidential budget memo, g_root -> g_analyst -> g_reporter and
 * g_root -> g_research. Each case changes one fact and states the expected verdict by hand:
 * outcome, the exact set of codes and, where it says something, the witness.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "policy/guard.h"
#include "suite.h"

#define RUN "r1"
#define HASH "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define ARROW " \xe2\x86\x92 "
#define T_VALID_FROM 1767225600.0 /* 2026-01-01T00:00:00Z */
#define T_VALID_TO 2082758400.0   /* 2036-01-01T00:00:00Z */
#define T_NOW 1780000000.0        /* 2026-05-28, inside every grant's validity */

#define BIT(c) (1u << (c))

/* ---------------------------------------------------------------------------------------- */
/* Fact builders                                                                             */
/* ---------------------------------------------------------------------------------------- */

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n != 0 ? n : 1, size);
    if (p == NULL) {
        fprintf(stderr, "test_guard: out of memory\n");
        exit(2);
    }
    return p;
}

/* A list of borrowed strings from a NULL-terminated array; the list owns only its array. */
static guard_strs strs_of(const char *const *list)
{
    guard_strs s = {NULL, 0};
    while (list[s.n] != NULL)
        s.n++;
    s.items = xcalloc(s.n, sizeof *s.items);
    for (size_t i = 0; i < s.n; i++)
        s.items[i] = (char *)list[i];
    return s;
}
#define STRS(...) strs_of((const char *const[]){__VA_ARGS__, NULL})
#define NO_STRS strs_of((const char *const[]){NULL})

static guard_strs strs_copy(const guard_strs *from)
{
    guard_strs s = {xcalloc(from->n, sizeof *s.items), from->n};
    for (size_t i = 0; i < from->n; i++)
        s.items[i] = from->items[i];
    return s;
}

static void strs_free(guard_strs *s)
{
    free(s->items);
    s->items = NULL;
    s->n = 0;
}

static const guard_resource RES_VENDOR_A = {"vendor_a", "Northwind Desks quote", 0, 0, NULL, NULL};
static const guard_resource RES_VENDOR_B = {"vendor_b", "Brightline Office quote", 0, 0, NULL,
                                            NULL};
static const guard_resource RES_VENDOR_C = {"vendor_c", "Cascade Furniture quote", 0, 0, NULL,
                                            NULL};
static const guard_resource RES_BUDGET = {"budget", "Budget memo", 2, 1, NULL, NULL};

/* An ancestry with room for cap artifacts, so pointers to its items stay valid. */
typedef struct {
    guard_ancestry anc;
    size_t cap;
} anc_builder;

static void anc_init(anc_builder *b, const char *root, size_t cap)
{
    memset(b, 0, sizeof *b);
    b->anc.root = (char *)root;
    b->anc.items = xcalloc(cap, sizeof *b->anc.items);
    b->cap = cap;
}

static guard_artifact *add_artifact(anc_builder *b, const char *id, const char *title,
                                    const char *context)
{
    CU_ASSERT_FATAL(b->anc.n < b->cap);
    guard_artifact *a = &b->anc.items[b->anc.n++];
    memset(a, 0, sizeof *a);
    a->id = (char *)id;
    a->run_id = RUN;
    a->title = (char *)title;
    a->kind_known = true;
    a->hash = HASH;
    a->capture_complete = true;
    a->producers = STRS(context);
    a->input_ids = NO_STRS;
    a->parents = NO_STRS;
    return a;
}

/* A source artifact read from resource r, labelled as r is. */
static guard_artifact *add_source(anc_builder *b, const char *id, const guard_resource *r,
                                  const char *context)
{
    guard_artifact *a = add_artifact(b, id, r->title, context);
    a->is_source = true;
    a->resources = xcalloc(1, sizeof *a->resources);
    a->resources[0] = *r;
    a->n_resources = 1;
    a->conf = r->conf;
    a->integrity = r->integrity;
    return a;
}

/* A derived artifact whose recorded inputs are exactly its parents, with the stored labels
 * given by hand. */
static guard_artifact *add_derived(anc_builder *b, const char *id, const char *title,
                                   const char *context, guard_strs parents, int conf, int integrity)
{
    guard_artifact *a = add_artifact(b, id, title, context);
    strs_free(&a->parents);
    strs_free(&a->input_ids);
    a->parents = parents;
    a->input_ids = strs_copy(&parents);
    a->conf = conf;
    a->integrity = integrity;
    return a;
}

static guard_artifact *find_artifact(anc_builder *b, const char *id)
{
    for (size_t i = 0; i < b->anc.n; i++)
        if (strcmp(b->anc.items[i].id, id) == 0)
            return &b->anc.items[i];
    CU_FAIL_FATAL("artifact not in the ancestry");
    return NULL;
}

static void anc_free(anc_builder *b)
{
    for (size_t i = 0; i < b->anc.n; i++) {
        guard_artifact *a = &b->anc.items[i];
        strs_free(&a->input_ids);
        strs_free(&a->parents);
        strs_free(&a->producers);
        free(a->resources);
    }
    free(b->anc.items);
    memset(b, 0, sizeof *b);
}

/*
 * The reference run's artifacts. Research (context c1) reads the vendor pages a1..a3 and
 * writes the summary a4; Analyze (c2) receives a4 and the pages (handoff "output", "inputs"),
 * reads the budget a5 and writes the internal recommendation a6; the recovered Report (c4)
 * writes the public comparison a7 from the pages and the summary.
 */
static void add_vendor_pages(anc_builder *b)
{
    add_source(b, "a1", &RES_VENDOR_A, "c1");
    add_source(b, "a2", &RES_VENDOR_B, "c1");
    add_source(b, "a3", &RES_VENDOR_C, "c1");
}

static void add_summary(anc_builder *b)
{
    add_derived(b, "a4", "Research summary", "c1", STRS("a1", "a2", "a3"), 0, 0);
}

/* Ancestry of the research summary a4. */
static void summary_ancestry(anc_builder *b)
{
    anc_init(b, "a4", 8);
    add_summary(b);
    add_vendor_pages(b);
}

/* Ancestry of the internal recommendation a6: confidential (budget), untrusted (pages). */
static void recommendation_ancestry(anc_builder *b)
{
    anc_init(b, "a6", 8);
    add_derived(b, "a6", "Internal recommendation", "c2", STRS("a4", "a1", "a2", "a3", "a5"), 2, 0);
    add_summary(b);
    add_vendor_pages(b);
    add_source(b, "a5", &RES_BUDGET, "c2");
}

/* Ancestry of the public comparison a7: public, untrusted. */
static void comparison_ancestry(anc_builder *b)
{
    anc_init(b, "a7", 8);
    add_derived(b, "a7", "Public vendor comparison", "c4", STRS("a1", "a2", "a3", "a4"), 0, 0);
    add_vendor_pages(b);
    add_summary(b);
}

typedef struct {
    guard_chain chain;
    size_t cap;
} chain_builder;

static void chain_init(chain_builder *b, const char *leaf, size_t cap)
{
    memset(b, 0, sizeof *b);
    b->chain.leaf = (char *)leaf;
    b->chain.items = xcalloc(cap, sizeof *b->chain.items);
    b->cap = cap;
}

/* A grant valid over the reference window; parent NULL with issuer set makes a root. */
static guard_grant *add_grant(chain_builder *b, const char *id, const char *parent,
                              const char *grantee, const char *issuer, const char *issuer_kind,
                              guard_strs tools, guard_strs recipients, guard_strs resources)
{
    CU_ASSERT_FATAL(b->chain.n < b->cap);
    guard_grant *g = &b->chain.items[b->chain.n++];
    memset(g, 0, sizeof *g);
    g->id = (char *)id;
    g->root = parent == NULL;
    g->tools = tools;
    g->recipients = recipients;
    g->resources = resources;
    g->valid_from = T_VALID_FROM;
    g->valid_to = T_VALID_TO;
    g->parents = parent != NULL ? STRS(parent) : NO_STRS;
    g->grantees = xcalloc(1, sizeof *g->grantees);
    g->grantees[0].id = (char *)grantee;
    g->grantees[0].kind = strcmp(grantee, "human_cfo") == 0 ? "human" : "agent";
    g->n_grantees = 1;
    if (issuer != NULL) {
        g->issuers = xcalloc(1, sizeof *g->issuers);
        g->issuers[0].id = (char *)issuer;
        g->issuers[0].kind = (char *)issuer_kind;
        g->n_issuers = 1;
    }
    return g;
}

static guard_grant *find_grant(chain_builder *b, const char *id)
{
    for (size_t i = 0; i < b->chain.n; i++)
        if (strcmp(b->chain.items[i].id, id) == 0)
            return &b->chain.items[i];
    CU_FAIL_FATAL("grant not in the chain");
    return NULL;
}

static void chain_free(chain_builder *b)
{
    for (size_t i = 0; i < b->chain.n; i++) {
        guard_grant *g = &b->chain.items[i];
        strs_free(&g->tools);
        strs_free(&g->recipients);
        strs_free(&g->resources);
        strs_free(&g->parents);
        free(g->grantees);
        free(g->issuers);
    }
    free(b->chain.items);
    memset(b, 0, sizeof *b);
}

static void add_g_root(chain_builder *b)
{
    add_grant(b, "g_root", NULL, "human_cfo", "human_cfo", "human",
              STRS("read_source", "deliver_internal", "deliver_public"), STRS("cfo", "public"),
              STRS("vendor_a", "vendor_b", "vendor_c", "budget"));
}

static void add_g_analyst(chain_builder *b)
{
    add_grant(b, "g_analyst", "g_root", "analyst", NULL, NULL,
              STRS("read_source", "deliver_internal", "deliver_public"), STRS("cfo", "public"),
              STRS("vendor_a", "vendor_b", "vendor_c", "budget"));
}

static void add_g_reporter(chain_builder *b)
{
    add_grant(b, "g_reporter", "g_analyst", "reporter", NULL, NULL, STRS("deliver_public"),
              STRS("public"), STRS("vendor_a", "vendor_b", "vendor_c"));
}

/* g_analyst -> g_root, as charter_grant_chain returns it for the analyze step. */
static void analyst_chain(chain_builder *b)
{
    chain_init(b, "g_analyst", 4);
    add_g_analyst(b);
    add_g_root(b);
}

/* g_reporter -> g_analyst -> g_root. */
static void reporter_chain(chain_builder *b)
{
    chain_init(b, "g_reporter", 4);
    add_g_reporter(b);
    add_g_analyst(b);
    add_g_root(b);
}

static guard_stepcap research_cap(void)
{
    guard_stepcap c = {"research",          "researcher", "g_research",
                       STRS("read_source"), NO_STRS,      STRS("vendor_a", "vendor_b", "vendor_c")};
    return c;
}

static guard_stepcap analyze_cap(void)
{
    guard_stepcap c = {"analyze",   "analyst",
                       "g_analyst", STRS("read_source", "deliver_internal"),
                       STRS("cfo"), STRS("vendor_a", "vendor_b", "vendor_c", "budget")};
    return c;
}

static guard_stepcap report_cap(void)
{
    guard_stepcap c = {"report",       "reporter",
                       "g_reporter",   STRS("deliver_public"),
                       STRS("public"), STRS("vendor_a", "vendor_b", "vendor_c")};
    return c;
}

static void cap_free(guard_stepcap *c)
{
    strs_free(&c->tools);
    strs_free(&c->recipients);
    strs_free(&c->resources);
}

static guard_context context_of(const char *id, const char *step, const char *owner)
{
    guard_context c = {(char *)id, RUN, (char *)step, STRS(owner)};
    return c;
}

static guard_delivery_request request(const char *payload, const char *recipient, int clearance,
                                      const char *tool, const char *grant)
{
    guard_delivery_request r = {
        RUN,  (char *)payload, (char *)recipient, clearance, (char *)tool, (char *)grant, NULL,
        false};
    return r;
}

/* ---------------------------------------------------------------------------------------- */
/* Assertions                                                                                */
/* ---------------------------------------------------------------------------------------- */

static void expect(const guard_decision *d, guard_outcome outcome, unsigned codes,
                   const char *witness)
{
    char got[256], want[256];
    guard_codes_format(d->codes, got, sizeof got);
    guard_codes_format(codes, want, sizeof want);
    if (d->outcome != outcome || d->codes != codes)
        fprintf(stderr, "\n  got %s [%s] %s\n  want %s [%s] %s\n",
                decision_outcome_name(d->outcome), got, d->witness ? d->witness : "(none)",
                decision_outcome_name(outcome), want, witness ? witness : "(any)");
    CU_ASSERT_EQUAL(d->outcome, outcome);
    CU_ASSERT_EQUAL(d->codes, codes);
    if (witness != NULL) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(d->witness);
        if (strcmp(d->witness, witness) != 0)
            fprintf(stderr, "\n  witness got  \"%s\"\n  witness want \"%s\"\n", d->witness,
                    witness);
        CU_ASSERT_STRING_EQUAL(d->witness, witness);
    }
}

static void expect_strs(const guard_strs *s, const char *const *want)
{
    size_t n = 0;
    while (want[n] != NULL)
        n++;
    CU_ASSERT_EQUAL_FATAL(s->n, n);
    for (size_t i = 0; i < n; i++)
        CU_ASSERT_STRING_EQUAL(s->items[i], want[i]);
}
#define EXPECT_STRS(s, ...) expect_strs((s), (const char *const[]){__VA_ARGS__, NULL})

/* Runs the delivery gate and checks the verdict; frees the decision. */
static void deliver_expect(const guard_stepcap *cap, const guard_context *ctx,
                           const guard_delivery_request *req, anc_builder *anc,
                           chain_builder *chain, guard_outcome outcome, unsigned codes,
                           const char *witness)
{
    guard_decision d;
    CU_ASSERT_EQUAL(guard_check_delivery(cap, ctx, req, &anc->anc, &chain->chain, T_NOW, &d), 0);
    expect(&d, outcome, codes, witness);
    if (outcome != GUARD_ALLOW) {
        CU_ASSERT_EQUAL(d.chain_order.n, 0);
        CU_ASSERT_EQUAL(d.sources.n, 0);
    }
    guard_decision_free(&d);
}

static void input_expect(const guard_stepcap *cap, const guard_context *ctx, anc_builder *anc,
                         guard_outcome outcome, unsigned codes, const char *witness)
{
    guard_decision d;
    CU_ASSERT_EQUAL(guard_check_input(cap, ctx, RUN, &anc->anc, &d), 0);
    expect(&d, outcome, codes, witness);
    guard_decision_free(&d);
}

static void chain_expect(chain_builder *chain, const char *actor, guard_outcome outcome,
                         unsigned codes, const char *witness)
{
    guard_decision d;
    CU_ASSERT_EQUAL(guard_check_chain(&chain->chain, actor, T_NOW, &d), 0);
    expect(&d, outcome, codes, witness);
    guard_decision_free(&d);
}

/* ---------------------------------------------------------------------------------------- */
/* The reference workflow                                                                    */
/* ---------------------------------------------------------------------------------------- */

static void test_cfo_delivery_of_recommendation_is_allowed(void)
{
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    guard_delivery_request req = request("a6", "cfo", 2, "deliver_internal", "g_analyst");
    anc_builder anc;
    chain_builder chain;
    recommendation_ancestry(&anc);
    analyst_chain(&chain);

    guard_decision d;
    CU_ASSERT_EQUAL(guard_check_delivery(&cap, &ctx, &req, &anc.anc, &chain.chain, T_NOW, &d), 0);
    expect(&d, GUARD_ALLOW, 0, NULL);
    CU_ASSERT_PTR_NULL(d.witness);
    EXPECT_STRS(&d.chain_order, "g_analyst", "g_root");
    EXPECT_STRS(&d.sources, "budget", "vendor_a", "vendor_b", "vendor_c");
    /* borrowed from the facts, not copies */
    CU_ASSERT_PTR_EQUAL(d.chain_order.items[0], chain.chain.items[0].id);
    guard_decision_free(&d);

    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* RULE-DELIVERY-TOOL: a tool the workflow declares with arguments is invoked, never delivered
 * through; the refusal stands alone (the recipient outside the step is not reported). */
static void test_delivery_through_a_live_tool_is_not_permitted(void)
{
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    guard_delivery_request req = request("a6", "nobody", 2, "deliver_internal", "g_analyst");
    req.live_tool = true;
    anc_builder anc;
    chain_builder chain;
    recommendation_ancestry(&anc);
    analyst_chain(&chain);
    guard_decision d;
    CU_ASSERT_EQUAL(guard_check_delivery(&cap, &ctx, &req, &anc.anc, &chain.chain, T_NOW, &d), 0);
    expect(&d, GUARD_DENY, 1u << GUARD_TOOL_NOT_PERMITTED,
           "tool deliver_internal declares arguments in the workflow: it is invoked with "
           "Gate/Invoke, never delivered to");
    guard_decision_free(&d);
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* A witness never echoes a control character: a fact holding one is escaped. */
static void test_witness_escapes_control_characters(void)
{
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    guard_delivery_request req = request("a6", "cfo", 2, "deliver\n\x1b[2J", "g_analyst");
    anc_builder anc;
    chain_builder chain;
    recommendation_ancestry(&anc);
    analyst_chain(&chain);
    guard_decision d;
    CU_ASSERT_EQUAL(guard_check_delivery(&cap, &ctx, &req, &anc.anc, &chain.chain, T_NOW, &d), 0);
    CU_ASSERT_EQUAL(d.outcome, GUARD_DENY);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d.witness);
    CU_ASSERT_PTR_NOT_NULL(strstr(d.witness, "tool deliver\\n\\x1b[2J outside the analyze step"));
    for (const char *c = d.witness; *c != '\0'; c++)
        CU_ASSERT_TRUE((unsigned char)*c >= 0x20 && *c != 0x7f);
    guard_decision_free(&d);
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

static void test_public_delivery_from_vendor_pages_and_summary_is_allowed(void)
{
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c4", "report", "reporter");
    guard_delivery_request req = request("a7", "public", 0, "deliver_public", "g_reporter");
    anc_builder anc;
    chain_builder chain;
    comparison_ancestry(&anc);
    reporter_chain(&chain);

    guard_decision d;
    CU_ASSERT_EQUAL(guard_check_delivery(&cap, &ctx, &req, &anc.anc, &chain.chain, T_NOW, &d), 0);
    expect(&d, GUARD_ALLOW, 0, NULL);
    EXPECT_STRS(&d.chain_order, "g_reporter", "g_analyst", "g_root");
    EXPECT_STRS(&d.sources, "vendor_a", "vendor_b", "vendor_c");
    guard_decision_free(&d);

    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-INPUT-SCOPE. */
static void test_handoff_from_budget_is_denied_with_witness(void)
{
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c3", "report", "reporter");
    anc_builder anc;
    recommendation_ancestry(&anc);
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_INPUT_OUT_OF_SCOPE),
                 "budget (confidential)" ARROW "Internal recommendation" ARROW
                 "report step {vendor_a, vendor_b, vendor_c}");
    anc_free(&anc);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

static void test_handoff_of_summary_to_analyst_is_allowed(void)
{
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    anc_builder anc;
    summary_ancestry(&anc);
    guard_decision d;
    CU_ASSERT_EQUAL(guard_check_input(&cap, &ctx, RUN, &anc.anc, &d), 0);
    expect(&d, GUARD_ALLOW, 0, NULL);
    EXPECT_STRS(&d.sources, "vendor_a", "vendor_b", "vendor_c");
    guard_decision_free(&d);
    anc_free(&anc);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-INPUT-SCOPE. */
static void test_budget_source_itself_into_report_step_is_denied(void)
{
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c3", "report", "reporter");
    anc_builder anc;
    anc_init(&anc, "a5", 1);
    add_source(&anc, "a5", &RES_BUDGET, "c2");
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_INPUT_OUT_OF_SCOPE),
                 "budget (confidential)" ARROW "report step {vendor_a, vendor_b, vendor_c}");
    anc_free(&anc);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-CHAIN-REVOCATION. */
static void test_revoked_reporter_grant_denies_public_delivery(void)
{
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c4", "report", "reporter");
    guard_delivery_request req = request("a7", "public", 0, "deliver_public", "g_reporter");
    anc_builder anc;
    chain_builder chain;
    comparison_ancestry(&anc);
    reporter_chain(&chain);
    find_grant(&chain, "g_reporter")->revoked_at = 1779999000.0;
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY, BIT(GUARD_GRANT_INVALID),
                   "g_reporter revoked");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* ---------------------------------------------------------------------------------------- */
/* Request against the step                                                                  */
/* ---------------------------------------------------------------------------------------- */

/* Checks RULE-DELIVERY-STEP. */
static void test_tool_outside_step_is_step_mismatch(void)
{
    /* g_analyst and g_root do cover deliver_public: only the step refuses it */
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    guard_delivery_request req = request("a6", "cfo", 2, "deliver_public", "g_analyst");
    anc_builder anc;
    chain_builder chain;
    recommendation_ancestry(&anc);
    analyst_chain(&chain);
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY, BIT(GUARD_STEP_MISMATCH),
                   "tool deliver_public outside the analyze step {read_source, deliver_internal}");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-DELIVERY-STEP. */
static void test_recipient_outside_step_is_step_mismatch(void)
{
    /* the public summary to public under g_analyst (which covers public): only the step
     * refuses the recipient */
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    guard_delivery_request req = request("a4", "public", 0, "deliver_internal", "g_analyst");
    anc_builder anc;
    chain_builder chain;
    summary_ancestry(&anc);
    analyst_chain(&chain);
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY, BIT(GUARD_STEP_MISMATCH),
                   "recipient public outside the analyze step {cfo}");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-DELIVERY-STEP. */
static void test_grant_other_than_the_steps_is_step_mismatch(void)
{
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    guard_delivery_request req = request("a6", "cfo", 2, "deliver_internal", "g_root");
    anc_builder anc;
    chain_builder chain;
    recommendation_ancestry(&anc);
    chain_init(&chain, "g_root", 1);
    add_g_root(&chain);
    /* g_root is granted to human_cfo, not the analyst: the chain says so too */
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY,
                   BIT(GUARD_STEP_MISMATCH) | BIT(GUARD_IDENTITY_MISMATCH),
                   "grant g_root is not the analyze step's grant g_analyst");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-INPUT-IDENTITY, RULE-DELIVERY-IDENTITY. */
static void test_context_owned_by_another_actor_is_identity_mismatch(void)
{
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "researcher");
    guard_delivery_request req = request("a6", "cfo", 2, "deliver_internal", "g_analyst");
    anc_builder anc;
    chain_builder chain;
    recommendation_ancestry(&anc);
    analyst_chain(&chain);
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY, BIT(GUARD_IDENTITY_MISMATCH),
                   "context c2 is owned by {researcher}, not analyst");
    /* the input gate refuses the same context */
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_IDENTITY_MISMATCH),
                 "context c2 is owned by {researcher}, not analyst");
    /* and a context with a second owner beside the actor */
    strs_free(&ctx.owners);
    ctx.owners = STRS("analyst", "reporter");
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_IDENTITY_MISMATCH),
                 "context c2 is owned by {analyst, reporter}, not analyst");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-INPUT-STEP. */
static void test_context_of_another_step_or_run_is_step_mismatch(void)
{
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c1", "research", "analyst");
    anc_builder anc;
    summary_ancestry(&anc);
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_STEP_MISMATCH),
                 "context c1 is of step research, not analyze");
    ctx.step = "analyze";
    ctx.run_id = "r2";
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_STEP_MISMATCH),
                 "context c1 is of run r2, not r1");
    anc_free(&anc);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* ---------------------------------------------------------------------------------------- */
/* Lineage and labels                                                                        */
/* ---------------------------------------------------------------------------------------- */

/* Checks RULE-DELIVERY-LABELS. */
static void test_relabeled_artifact_is_label_mismatch(void)
{
    /* the recommendation stored as internal although the budget makes it confidential */
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    guard_delivery_request req = request("a6", "cfo", 2, "deliver_internal", "g_analyst");
    anc_builder anc;
    chain_builder chain;
    recommendation_ancestry(&anc);
    analyst_chain(&chain);
    find_artifact(&anc, "a6")->conf = 1;
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY, BIT(GUARD_LABEL_MISMATCH),
                   "a6 labelled internal, untrusted; recomputed confidential, untrusted");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-INPUT-LABELS. */
static void test_relabeled_source_is_label_mismatch(void)
{
    /* a vendor page stored as trusted: the resource says untrusted */
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    anc_builder anc;
    summary_ancestry(&anc);
    find_artifact(&anc, "a2")->integrity = 1;
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_LABEL_MISMATCH),
                 "a2 labelled public, trusted; recomputed public, untrusted");
    anc_free(&anc);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-DELIVERY-LABELS. */
static void test_laundered_integrity_is_label_mismatch(void)
{
    /* the recommendation claims trusted integrity while its vendor-page parents are untrusted */
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    guard_delivery_request req = request("a6", "cfo", 2, "deliver_internal", "g_analyst");
    anc_builder anc;
    chain_builder chain;
    recommendation_ancestry(&anc);
    analyst_chain(&chain);
    find_artifact(&anc, "a6")->integrity = 1;
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY, BIT(GUARD_LABEL_MISMATCH),
                   "a6 labelled confidential, trusted; recomputed confidential, untrusted");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-INPUT-PROVENANCE. */
static void test_cross_run_input_is_provenance_incomplete(void)
{
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    anc_builder anc;
    summary_ancestry(&anc);
    find_artifact(&anc, "a2")->run_id = "r2";
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE),
                 "a2 is of run r2, not r1");
    anc_free(&anc);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-INPUT-PROVENANCE. */
static void test_hidden_second_parent_is_provenance_incomplete(void)
{
    /* the summary has a DERIVED_FROM edge to the budget that was never a recorded input, and
     * its stored public label hides the budget's confidentiality */
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    anc_builder anc;
    anc_init(&anc, "a4", 8);
    guard_artifact *a4 = add_derived(&anc, "a4", "Research summary", "c1", STRS("a1", "a5"), 0, 0);
    strs_free(&a4->input_ids);
    a4->input_ids = STRS("a1");
    add_source(&anc, "a1", &RES_VENDOR_A, "c1");
    add_source(&anc, "a5", &RES_BUDGET, "c2");
    input_expect(&cap, &ctx, &anc, GUARD_DENY,
                 BIT(GUARD_PROVENANCE_INCOMPLETE) | BIT(GUARD_LABEL_MISMATCH),
                 "a4 is derived from a5, which is not among its recorded inputs");
    anc_free(&anc);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-INPUT-PROVENANCE. */
static void test_recorded_input_without_edge_is_provenance_incomplete(void)
{
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    anc_builder anc;
    summary_ancestry(&anc);
    guard_artifact *a4 = find_artifact(&anc, "a4");
    strs_free(&a4->input_ids);
    a4->input_ids = STRS("a1", "a2", "a3", "a9");
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE),
                 "a4 recorded input a9 has no DERIVED_FROM edge");
    anc_free(&anc);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

static void test_missing_parent_artifact_is_provenance_incomplete(void)
{
    /* a3 is a parent of the summary but has no entry (its hash was deleted) */
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    anc_builder anc;
    anc_init(&anc, "a4", 4);
    add_summary(&anc);
    add_source(&anc, "a1", &RES_VENDOR_A, "c1");
    add_source(&anc, "a2", &RES_VENDOR_B, "c1");
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE),
                 "parent a3 of a4 missing from the ancestry");
    int conf = 7, integrity = 7;
    CU_ASSERT_EQUAL(guard_recompute_labels(&anc.anc, "a4", &conf, &integrity), -1);
    CU_ASSERT_EQUAL(conf, 7); /* nothing written */
    CU_ASSERT_EQUAL(integrity, 7);
    anc_free(&anc);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

static void test_payload_absent_from_ancestry_is_provenance_incomplete(void)
{
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    anc_builder anc;
    anc_init(&anc, "a8", 1);
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE),
                 "payload a8 missing from its ancestry");
    anc_free(&anc);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

static void test_malformed_artifacts_are_provenance_incomplete(void)
{
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    anc_builder anc;

    summary_ancestry(&anc);
    find_artifact(&anc, "a4")->capture_complete = false;
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE),
                 "a4 capture incomplete");
    anc_free(&anc);

    summary_ancestry(&anc);
    find_artifact(&anc, "a1")->hash = "not-a-hash";
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE),
                 "a1 has no valid content hash");
    anc_free(&anc);

    summary_ancestry(&anc);
    find_artifact(&anc, "a2")->kind_known = false;
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE),
                 "a2 has no known kind");
    anc_free(&anc);

    summary_ancestry(&anc);
    guard_artifact *a3 = find_artifact(&anc, "a3");
    a3->n_resources = 0; /* a source without its FROM_RESOURCE edge */
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE),
                 "source a3 has 0 resources, not 1");
    a3->n_resources = 1;
    a3->resources[0].conf = -1; /* the resource's label missing */
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE),
                 "resource vendor_c of a3 has no valid labels");
    anc_free(&anc);

    summary_ancestry(&anc);
    guard_artifact *a4 = find_artifact(&anc, "a4");
    strs_free(&a4->producers);
    a4->producers = STRS("c1", "c9");
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE),
                 "a4 has 2 producing contexts, not 1");
    anc_free(&anc);

    /* a source claims inputs, or a parent, though nothing may come before a source */
    summary_ancestry(&anc);
    guard_artifact *a1 = find_artifact(&anc, "a1");
    strs_free(&a1->input_ids);
    a1->input_ids = STRS("a2");
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE),
                 "source a1 has recorded inputs");
    strs_free(&a1->input_ids);
    a1->input_ids = NO_STRS;
    strs_free(&a1->parents);
    a1->parents = STRS("a2");
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE),
                 "source a1 is derived from 1 artifact(s)");
    anc_free(&anc);

    /* a parent edge whose id is missing: a2 is then also unreachable */
    summary_ancestry(&anc);
    find_artifact(&anc, "a4")->parents.items[1] = NULL;
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE),
                 "a4 has a parent or recorded input without an id");
    anc_free(&anc);

    /* an artifact the payload does not reach has no place in its ancestry */
    summary_ancestry(&anc);
    add_source(&anc, "a5", &RES_BUDGET, "c2");
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE),
                 "a5 is not reachable from a4");
    anc_free(&anc);

    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-INPUT-PROVENANCE. */
static void test_lineage_cycle_is_provenance_incomplete(void)
{
    /* a4 <- a6 <- a4: each claims the other as an input */
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    anc_builder anc;
    anc_init(&anc, "a6", 4);
    add_derived(&anc, "a6", "Internal recommendation", "c2", STRS("a4"), 0, 0);
    add_derived(&anc, "a4", "Research summary", "c1", STRS("a1", "a6"), 0, 0);
    add_source(&anc, "a1", &RES_VENDOR_A, "c1");
    guard_decision d;
    CU_ASSERT_EQUAL(guard_check_input(&cap, &ctx, RUN, &anc.anc, &d), 0);
    expect(&d, GUARD_DENY, BIT(GUARD_PROVENANCE_INCOMPLETE), NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d.witness);
    CU_ASSERT(strcmp(d.witness, "DERIVED_FROM cycle through a6") == 0 ||
              strcmp(d.witness, "DERIVED_FROM cycle through a4") == 0);
    guard_decision_free(&d);
    int conf, integrity;
    CU_ASSERT_EQUAL(guard_recompute_labels(&anc.anc, "a6", &conf, &integrity), -1);
    CU_ASSERT_EQUAL(guard_recompute_labels(&anc.anc, "a1", &conf, &integrity), 0);
    CU_ASSERT_EQUAL(conf, 0);
    CU_ASSERT_EQUAL(integrity, 0);
    anc_free(&anc);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

static void test_truncated_ancestry_is_unknown(void)
{
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c4", "report", "reporter");
    guard_delivery_request req = request("a7", "public", 0, "deliver_public", "g_reporter");
    anc_builder anc;
    chain_builder chain;
    comparison_ancestry(&anc);
    anc.anc.truncated = true;
    reporter_chain(&chain);
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_UNKNOWN, BIT(GUARD_GRAPH_ERROR),
                   "ancestry of a7 truncated after 5 artifacts");
    input_expect(&cap, &ctx, &anc, GUARD_UNKNOWN, BIT(GUARD_GRAPH_ERROR),
                 "ancestry of a7 truncated after 5 artifacts");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

static void test_missing_facts_are_unknown(void)
{
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c4", "report", "reporter");
    guard_delivery_request req = request("a7", "public", -1, "deliver_public", "g_reporter");
    anc_builder anc;
    chain_builder chain;
    comparison_ancestry(&anc);
    reporter_chain(&chain);
    /* the recipient's clearance unknown */
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_UNKNOWN, BIT(GUARD_GRAPH_ERROR),
                   "recipient public has no clearance");
    /* the ancestry of another artifact than the payload */
    req.recipient_clearance = 0;
    req.payload_id = "a4";
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_UNKNOWN, BIT(GUARD_GRAPH_ERROR),
                   "ancestry facts are of a7, not of the payload a4");
    guard_decision d;
    CU_ASSERT_EQUAL(guard_check_delivery(&cap, &ctx, &req, NULL, &chain.chain, T_NOW, &d), 0);
    CU_ASSERT_EQUAL(d.outcome, GUARD_UNKNOWN);
    CU_ASSERT(d.codes & BIT(GUARD_GRAPH_ERROR));
    guard_decision_free(&d);
    CU_ASSERT_EQUAL(guard_check_input(&cap, NULL, RUN, &anc.anc, &d), 0);
    CU_ASSERT_EQUAL(d.outcome, GUARD_UNKNOWN);
    CU_ASSERT_EQUAL(d.codes, BIT(GUARD_GRAPH_ERROR));
    guard_decision_free(&d);
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* ---------------------------------------------------------------------------------------- */
/* Clearance and resources                                                                   */
/* ---------------------------------------------------------------------------------------- */

/* Checks RULE-DELIVERY-CLEARANCE. */
static void test_clearance_exceeded_names_the_path_to_the_budget(void)
{
    /* an analyze step that may deliver publicly: the grants allow it, the labels do not */
    guard_stepcap cap = analyze_cap();
    strs_free(&cap.tools);
    strs_free(&cap.recipients);
    cap.tools = STRS("deliver_internal", "deliver_public");
    cap.recipients = STRS("cfo", "public");
    guard_context ctx = context_of("c2", "analyze", "analyst");
    guard_delivery_request req = request("a6", "public", 0, "deliver_public", "g_analyst");
    anc_builder anc;
    chain_builder chain;
    recommendation_ancestry(&anc);
    analyst_chain(&chain);
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY, BIT(GUARD_CLEARANCE_EXCEEDED),
                   "budget (confidential)" ARROW "Internal recommendation" ARROW
                   "public (clearance public)");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-DELIVERY-CLEARANCE. */
static void test_internal_clearance_below_confidential_payload_is_exceeded(void)
{
    /* the CFO recipient as if registered with internal clearance: one level short */
    guard_stepcap cap = analyze_cap();
    guard_context ctx = context_of("c2", "analyze", "analyst");
    guard_delivery_request req = request("a6", "cfo", 1, "deliver_internal", "g_analyst");
    anc_builder anc;
    chain_builder chain;
    recommendation_ancestry(&anc);
    analyst_chain(&chain);
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY, BIT(GUARD_CLEARANCE_EXCEEDED),
                   "budget (confidential)" ARROW "Internal recommendation" ARROW
                   "cfo (clearance internal)");
    anc_free(&anc);
    /* the public summary fits an internal clearance */
    summary_ancestry(&anc);
    req.payload_id = "a4";
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_ALLOW, 0, NULL);
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

static void test_handoff_published_by_reporter_collects_every_code(void)
{
    /* the poisoned recommendation delivered publicly by the Reporter: too confidential for the
     * recipient and outside the step and the reporter's grant; the witness is clearance's */
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c3", "report", "reporter");
    guard_delivery_request req = request("a6", "public", 0, "deliver_public", "g_reporter");
    anc_builder anc;
    chain_builder chain;
    recommendation_ancestry(&anc);
    reporter_chain(&chain);
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY,
                   BIT(GUARD_CLEARANCE_EXCEEDED) | BIT(GUARD_RESOURCE_OUT_OF_SCOPE),
                   "budget (confidential)" ARROW "Internal recommendation" ARROW
                   "public (clearance public)");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-DELIVERY-SCOPE. */
static void test_resource_outside_a_grant_of_the_chain_is_out_of_scope(void)
{
    /* g_analyst no longer covers vendor_c; the public comparison derives from it */
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c4", "report", "reporter");
    guard_delivery_request req = request("a7", "public", 0, "deliver_public", "g_reporter");
    anc_builder anc;
    chain_builder chain;
    comparison_ancestry(&anc);
    reporter_chain(&chain);
    guard_grant *g = find_grant(&chain, "g_analyst");
    strs_free(&g->resources);
    g->resources = STRS("vendor_a", "vendor_b", "budget");
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY, BIT(GUARD_RESOURCE_OUT_OF_SCOPE),
                   "vendor_c (public)" ARROW "Public vendor comparison" ARROW
                   "grant g_analyst {vendor_a, vendor_b, budget}");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-DELIVERY-SCOPE. */
static void test_resource_outside_the_step_is_out_of_scope(void)
{
    /* the analyze step without vendor_c, delivering the recommendation to the CFO; the path
     * goes through the nearest artifact reaching vendor_c (a3 is a direct parent) */
    guard_stepcap cap = analyze_cap();
    strs_free(&cap.resources);
    cap.resources = STRS("vendor_a", "vendor_b", "budget");
    guard_context ctx = context_of("c2", "analyze", "analyst");
    guard_delivery_request req = request("a6", "cfo", 2, "deliver_internal", "g_analyst");
    anc_builder anc;
    chain_builder chain;
    recommendation_ancestry(&anc);
    analyst_chain(&chain);
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY, BIT(GUARD_RESOURCE_OUT_OF_SCOPE),
                   "vendor_c (public)" ARROW "Internal recommendation" ARROW
                   "analyze step {vendor_a, vendor_b, budget}");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-CHAIN-COVERAGE. */
static void test_grant_not_covering_the_tool_is_grant_invalid(void)
{
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c4", "report", "reporter");
    guard_delivery_request req = request("a7", "public", 0, "deliver_public", "g_reporter");
    anc_builder anc;
    chain_builder chain;
    comparison_ancestry(&anc);
    reporter_chain(&chain);
    guard_grant *g = find_grant(&chain, "g_analyst");
    strs_free(&g->tools);
    g->tools = STRS("read_source", "deliver_internal");
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY, BIT(GUARD_GRANT_INVALID),
                   "g_analyst does not cover tool deliver_public");
    strs_free(&g->tools);
    g->tools = STRS("read_source", "deliver_internal", "deliver_public");
    strs_free(&g->recipients);
    g->recipients = STRS("cfo");
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY, BIT(GUARD_GRANT_INVALID),
                   "g_analyst does not cover recipient public");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* ---------------------------------------------------------------------------------------- */
/* Delegation chain                                                                          */
/* ---------------------------------------------------------------------------------------- */

static void test_valid_chain_is_allowed_leaf_first(void)
{
    chain_builder chain;
    reporter_chain(&chain);
    guard_decision d;
    CU_ASSERT_EQUAL(guard_check_chain(&chain.chain, "reporter", T_NOW, &d), 0);
    expect(&d, GUARD_ALLOW, 0, NULL);
    EXPECT_STRS(&d.chain_order, "g_reporter", "g_analyst", "g_root");
    guard_decision_free(&d);
    /* the same facts listed root first give the same order */
    chain_free(&chain);
    chain_init(&chain, "g_reporter", 3);
    add_g_root(&chain);
    add_g_analyst(&chain);
    add_g_reporter(&chain);
    CU_ASSERT_EQUAL(guard_check_chain(&chain.chain, "reporter", T_NOW, &d), 0);
    expect(&d, GUARD_ALLOW, 0, NULL);
    EXPECT_STRS(&d.chain_order, "g_reporter", "g_analyst", "g_root");
    guard_decision_free(&d);
    chain_free(&chain);
}

/* Checks RULE-CHAIN-HUMAN-ROOT. */
static void test_root_grant_issued_by_agent_is_grant_invalid(void)
{
    chain_builder chain;
    reporter_chain(&chain);
    guard_grant *root = find_grant(&chain, "g_root");
    root->issuers[0].id = "analyst";
    root->issuers[0].kind = "agent";
    chain_expect(&chain, "reporter", GUARD_DENY, BIT(GUARD_GRANT_INVALID),
                 "root g_root issued by analyst (agent), not a human");
    root->n_issuers = 0;
    chain_expect(&chain, "reporter", GUARD_DENY, BIT(GUARD_GRANT_INVALID),
                 "root g_root has 0 issuers, not 1");
    chain_free(&chain);
}

/* Checks RULE-CHAIN-REVOCATION. */
static void test_revoked_ancestor_grant_is_grant_invalid(void)
{
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c4", "report", "reporter");
    guard_delivery_request req = request("a7", "public", 0, "deliver_public", "g_reporter");
    anc_builder anc;
    chain_builder chain;
    comparison_ancestry(&anc);
    reporter_chain(&chain);
    find_grant(&chain, "g_analyst")->revoked_at = 1779999000.0;
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY, BIT(GUARD_GRANT_INVALID),
                   "g_analyst revoked");
    chain_expect(&chain, "reporter", GUARD_DENY, BIT(GUARD_GRANT_INVALID), "g_analyst revoked");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Checks RULE-CHAIN-EXPIRY. */
static void test_expired_grant_is_grant_invalid(void)
{
    chain_builder chain;
    reporter_chain(&chain);
    guard_grant *g = find_grant(&chain, "g_reporter");
    g->valid_to = T_NOW - 1.0;
    chain_expect(&chain, "reporter", GUARD_DENY, BIT(GUARD_GRANT_INVALID), "g_reporter expired");
    g->valid_to = T_NOW; /* valid while now < valid_to: the boundary itself is expired */
    chain_expect(&chain, "reporter", GUARD_DENY, BIT(GUARD_GRANT_INVALID), "g_reporter expired");
    g->valid_to = T_NOW + 0.001;
    chain_expect(&chain, "reporter", GUARD_ALLOW, 0, NULL);
    chain_free(&chain);
}

/* Checks RULE-CHAIN-EXPIRY. */
static void test_grant_not_yet_valid_is_grant_invalid(void)
{
    chain_builder chain;
    reporter_chain(&chain);
    guard_grant *g = find_grant(&chain, "g_root");
    g->valid_from = T_NOW + 60.0;
    chain_expect(&chain, "reporter", GUARD_DENY, BIT(GUARD_GRANT_INVALID), "g_root not yet valid");
    g->valid_from = T_NOW; /* valid_from <= now: the boundary is valid */
    chain_expect(&chain, "reporter", GUARD_ALLOW, 0, NULL);
    chain_free(&chain);
}

/* Checks RULE-CHAIN-BRANCH. */
static void test_branched_chain_is_grant_invalid(void)
{
    chain_builder chain;
    chain_init(&chain, "g_reporter", 4);
    add_g_reporter(&chain);
    add_g_analyst(&chain);
    add_g_root(&chain);
    add_grant(&chain, "g_research", "g_root", "researcher", NULL, NULL, STRS("read_source"),
              NO_STRS, STRS("vendor_a", "vendor_b", "vendor_c"));
    guard_grant *g = find_grant(&chain, "g_reporter");
    strs_free(&g->parents);
    g->parents = STRS("g_analyst", "g_research");
    chain_expect(&chain, "reporter", GUARD_DENY, BIT(GUARD_GRANT_INVALID),
                 "g_reporter is delegated from 2 grants (branched)");
    chain_free(&chain);
}

/* Checks RULE-CHAIN-CYCLE. */
static void test_grant_cycle_is_grant_invalid(void)
{
    /* g_analyst delegated from g_reporter: the walk comes back to g_reporter, never a root */
    chain_builder chain;
    chain_init(&chain, "g_reporter", 2);
    add_g_reporter(&chain);
    add_g_analyst(&chain);
    guard_grant *g = find_grant(&chain, "g_analyst");
    strs_free(&g->parents);
    g->parents = STRS("g_reporter");
    chain_expect(&chain, "reporter", GUARD_DENY, BIT(GUARD_GRANT_INVALID),
                 "delegation cycle at g_reporter");
    chain_free(&chain);
}

/* Checks RULE-CHAIN-BRANCH. */
static void test_incomplete_or_malformed_chain_is_grant_invalid(void)
{
    chain_builder chain;
    /* the parent g_analyst is named but absent from the facts */
    chain_init(&chain, "g_reporter", 2);
    add_g_reporter(&chain);
    add_g_root(&chain);
    chain_expect(&chain, "reporter", GUARD_DENY, BIT(GUARD_GRANT_INVALID),
                 "parent g_analyst of g_reporter missing from the chain");
    chain_free(&chain);

    /* a root that has a DELEGATED_FROM parent */
    reporter_chain(&chain);
    guard_grant *root = find_grant(&chain, "g_root");
    strs_free(&root->parents);
    root->parents = STRS("g_analyst");
    chain_expect(&chain, "reporter", GUARD_DENY, BIT(GUARD_GRANT_INVALID),
                 "root g_root is delegated from g_analyst");
    chain_free(&chain);

    /* a non-root grant with no parent */
    reporter_chain(&chain);
    guard_grant *an = find_grant(&chain, "g_analyst");
    strs_free(&an->parents);
    an->parents = NO_STRS;
    chain_expect(&chain, "reporter", GUARD_DENY, BIT(GUARD_GRANT_INVALID),
                 "g_analyst has no parent and is not a root");
    chain_free(&chain);
}

/* Checks RULE-CHAIN-GRANTEE. */
static void test_leaf_grantee_not_the_actor_is_identity_mismatch(void)
{
    chain_builder chain;
    reporter_chain(&chain);
    find_grant(&chain, "g_reporter")->grantees[0].id = "analyst";
    chain_expect(&chain, "reporter", GUARD_DENY, BIT(GUARD_IDENTITY_MISMATCH),
                 "g_reporter is granted to {analyst}, not reporter");
    chain_free(&chain);
}

/* Checks RULE-CHAIN-GRANTEE. */
static void test_missing_grant_is_grant_not_found(void)
{
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c4", "report", "reporter");
    guard_delivery_request req = request("a7", "public", 0, "deliver_public", "g_reporter");
    anc_builder anc;
    chain_builder chain;
    comparison_ancestry(&anc);
    chain_init(&chain, "g_reporter", 1); /* charter_grant_chain found nothing */
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY, BIT(GUARD_GRANT_NOT_FOUND),
                   "grant g_reporter not found");
    chain_expect(&chain, "reporter", GUARD_DENY, BIT(GUARD_GRANT_NOT_FOUND),
                 "grant g_reporter not found");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* Decides the host identity facts and checks outcome, codes and witness (NULL: none). */
static void identity_expect(const guard_identity *id, guard_outcome outcome, unsigned codes,
                            const char *witness)
{
    guard_decision d;
    CU_ASSERT_EQUAL_FATAL(guard_check_identity(id, &d), 0);
    CU_ASSERT_EQUAL(d.outcome, outcome);
    CU_ASSERT_EQUAL(d.codes, codes);
    if (witness == NULL) {
        CU_ASSERT_PTR_NULL(d.witness);
    } else {
        CU_ASSERT_PTR_NOT_NULL_FATAL(d.witness);
        CU_ASSERT_STRING_EQUAL(d.witness, witness);
    }
    guard_decision_free(&d);
}

/* Checks RULE-HOST-IDENTITY: a host credential acts only through what one of its actors owns. */
static void test_host_credential_of_another_actor_is_identity_mismatch(void)
{
    guard_identity id = {"context c3", STRS("analyst"), "cred1", STRS("reporter")};
    identity_expect(&id, GUARD_DENY, BIT(GUARD_IDENTITY_MISMATCH),
                    "context c3 is owned by {analyst}; credential cred1 acts for {reporter}");
    /* one of its actors owning it is enough, whichever */
    strs_free(&id.actors);
    id.actors = STRS("reporter", "analyst");
    identity_expect(&id, GUARD_ALLOW, 0, NULL);
    /* a context with no owner, or a credential bound to no actor, is never its */
    strs_free(&id.owners);
    id.owners = NO_STRS;
    identity_expect(&id, GUARD_DENY, BIT(GUARD_IDENTITY_MISMATCH),
                    "context c3 is owned by {}; credential cred1 acts for {reporter, analyst}");
    strs_free(&id.owners);
    strs_free(&id.actors);
    id.owners = STRS("analyst");
    id.actors = NO_STRS;
    identity_expect(&id, GUARD_DENY, BIT(GUARD_IDENTITY_MISMATCH),
                    "context c3 is owned by {analyst}; credential cred1 acts for {}");
    /* missing facts: unknown */
    id.credential = NULL;
    identity_expect(&id, GUARD_UNKNOWN, BIT(GUARD_GRAPH_ERROR), "no host identity facts");
    identity_expect(NULL, GUARD_UNKNOWN, BIT(GUARD_GRAPH_ERROR), "no host identity facts");
    strs_free(&id.owners);
    strs_free(&id.actors);
}

static void test_several_faults_collect_codes_and_witness_follows_priority(void)
{
    /* revoked leaf, expired root, a tool outside the step and a relabeled payload: every code
     * is set; the witness is STEP_MISMATCH's, first in the documented order */
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c4", "report", "reporter");
    guard_delivery_request req = request("a7", "public", 0, "deliver_internal", "g_reporter");
    anc_builder anc;
    chain_builder chain;
    comparison_ancestry(&anc);
    reporter_chain(&chain);
    find_artifact(&anc, "a7")->integrity = 1;
    find_grant(&chain, "g_reporter")->revoked_at = 1.0;
    find_grant(&chain, "g_root")->valid_to = T_NOW - 10.0;
    /* g_reporter also does not list deliver_internal */
    deliver_expect(&cap, &ctx, &req, &anc, &chain, GUARD_DENY,
                   BIT(GUARD_STEP_MISMATCH) | BIT(GUARD_LABEL_MISMATCH) | BIT(GUARD_GRANT_INVALID),
                   "tool deliver_internal outside the report step {deliver_public}");
    chain_expect(&chain, "reporter", GUARD_DENY, BIT(GUARD_GRANT_INVALID), "g_reporter revoked");
    anc_free(&anc);
    chain_free(&chain);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* ---------------------------------------------------------------------------------------- */
/* Scale                                                                                     */
/* ---------------------------------------------------------------------------------------- */

#define DEEP 10000

/* d0 a source read from res, then d1 <- d0, d2 <- d1, ... up to the payload d<DEEP-1>. */
static void deep_ancestry(anc_builder *anc, char ids[][16], const guard_resource *res)
{
    for (int i = 0; i < DEEP; i++)
        snprintf(ids[i], 16, "d%d", i);
    anc_init(anc, ids[DEEP - 1], DEEP);
    /* payload first, as a breadth-first query lists it */
    for (int i = DEEP - 1; i >= 1; i--)
        add_derived(anc, ids[i], NULL, "c2", STRS(ids[i - 1]), res->conf, res->integrity);
    add_source(anc, ids[0], res, "c1");
}

static void test_ten_thousand_deep_lineage_is_judged_without_recursion(void)
{
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c3", "report", "reporter");
    static char ids[DEEP][16];
    anc_builder anc;

    deep_ancestry(&anc, ids, &RES_VENDOR_A);
    guard_decision d;
    CU_ASSERT_EQUAL(guard_check_input(&cap, &ctx, RUN, &anc.anc, &d), 0);
    expect(&d, GUARD_ALLOW, 0, NULL);
    EXPECT_STRS(&d.sources, "vendor_a");
    guard_decision_free(&d);
    int conf = -1, integrity = -1;
    CU_ASSERT_EQUAL(guard_recompute_labels(&anc.anc, ids[DEEP - 1], &conf, &integrity), 0);
    CU_ASSERT_EQUAL(conf, 0);
    CU_ASSERT_EQUAL(integrity, 0);
    /* one relabeled artifact in the middle is found */
    anc.anc.items[DEEP / 2].conf = 1;
    CU_ASSERT_EQUAL(guard_check_input(&cap, &ctx, RUN, &anc.anc, &d), 0);
    expect(&d, GUARD_DENY, BIT(GUARD_LABEL_MISMATCH),
           "d4999 labelled internal, untrusted; recomputed public, untrusted");
    guard_decision_free(&d);
    anc_free(&anc);

    /* the budget 9,999 hops down: denied, the witness walks every hop up to the payload */
    deep_ancestry(&anc, ids, &RES_BUDGET);
    CU_ASSERT_EQUAL(guard_check_input(&cap, &ctx, RUN, &anc.anc, &d), 0);
    expect(&d, GUARD_DENY, BIT(GUARD_INPUT_OUT_OF_SCOPE), NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d.witness);
    const char *head = "budget (confidential)" ARROW "d1" ARROW "d2" ARROW;
    const char *tail = ARROW "d9999" ARROW "report step {vendor_a, vendor_b, vendor_c}";
    CU_ASSERT_EQUAL(strncmp(d.witness, head, strlen(head)), 0);
    size_t wl = strlen(d.witness);
    CU_ASSERT(wl > strlen(tail) && strcmp(d.witness + wl - strlen(tail), tail) == 0);
    /* 9,999 artifacts on the path, each after one arrow, and one before the step */
    size_t arrows = 0;
    for (const char *p = d.witness; (p = strstr(p, ARROW)) != NULL; p += strlen(ARROW))
        arrows++;
    CU_ASSERT_EQUAL(arrows, DEEP);
    guard_decision_free(&d);
    anc_free(&anc);

    strs_free(&ctx.owners);
    cap_free(&cap);
}

static void test_wide_ancestry_witness_takes_the_shortest_path(void)
{
    /* 1,500 derived artifacts in a ladder e0..e1499 (each from the previous and a vendor
     * page), plus the budget reached two ways: at the bottom of the ladder and one hop under
     * the payload through "Budget note". BFS must report the short way. */
    enum { WIDE = 1500 };
    static char ids[WIDE][16];
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c3", "report", "reporter");
    anc_builder anc;
    for (int i = 0; i < WIDE; i++)
        snprintf(ids[i], 16, "e%d", i);
    anc_init(&anc, ids[WIDE - 1], WIDE + 4);
    add_derived(&anc, ids[WIDE - 1], "Payload", "c2", STRS(ids[WIDE - 2], "note"), 2, 0);
    add_derived(&anc, "note", "Budget note", "c2", STRS("b"), 2, 1);
    for (int i = WIDE - 2; i >= 1; i--)
        add_derived(&anc, ids[i], NULL, "c2", STRS(ids[i - 1], "v"), 2, 0);
    add_derived(&anc, ids[0], NULL, "c2", STRS("b", "v"), 2, 0);
    add_source(&anc, "b", &RES_BUDGET, "c1");
    add_source(&anc, "v", &RES_VENDOR_A, "c1");
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_INPUT_OUT_OF_SCOPE),
                 "budget (confidential)" ARROW "Budget note" ARROW "Payload" ARROW
                 "report step {vendor_a, vendor_b, vendor_c}");
    int conf, integrity;
    CU_ASSERT_EQUAL(guard_recompute_labels(&anc.anc, ids[WIDE - 1], &conf, &integrity), 0);
    CU_ASSERT_EQUAL(conf, 2);
    CU_ASSERT_EQUAL(integrity, 0);
    CU_ASSERT_EQUAL(guard_recompute_labels(&anc.anc, "note", &conf, &integrity), 0);
    CU_ASSERT_EQUAL(conf, 2);
    CU_ASSERT_EQUAL(integrity, 1);
    CU_ASSERT_EQUAL(guard_recompute_labels(&anc.anc, "missing", &conf, &integrity), -1);
    anc_free(&anc);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* ---------------------------------------------------------------------------------------- */
/* Names and small functions                                                                 */
/* ---------------------------------------------------------------------------------------- */

static void test_code_and_outcome_names_round_trip(void)
{
    CU_ASSERT_STRING_EQUAL(decision_code_name(GUARD_INPUT_OUT_OF_SCOPE), "INPUT_OUT_OF_SCOPE");
    CU_ASSERT_STRING_EQUAL(decision_code_name(GUARD_GRAPH_ERROR), "GRAPH_ERROR");
    CU_ASSERT_EQUAL(decision_code_from_name("DELIVERY_CONFLICT"), GUARD_DELIVERY_CONFLICT);
    CU_ASSERT_EQUAL(decision_code_from_name("GRANT_NOT_FOUND"), GUARD_GRANT_NOT_FOUND);
    CU_ASSERT_EQUAL(decision_code_from_name("grant_invalid"), -1);
    CU_ASSERT_EQUAL(decision_code_from_name(NULL), -1);
    for (int c = 0; c < GUARD_CODE_COUNT; c++)
        CU_ASSERT_EQUAL(decision_code_from_name(decision_code_name((guard_code)c)), c);
    CU_ASSERT_STRING_EQUAL(decision_outcome_name(GUARD_ALLOW), "allow");
    CU_ASSERT_STRING_EQUAL(decision_outcome_name(GUARD_DENY), "deny");
    CU_ASSERT_STRING_EQUAL(decision_outcome_name(GUARD_UNKNOWN), "unknown");
}

static void test_codes_format_writes_whole_names(void)
{
    char buf[64];
    guard_codes_format(0, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "");
    guard_codes_format(BIT(GUARD_PROVENANCE_INCOMPLETE) | BIT(GUARD_LABEL_MISMATCH), buf,
                       sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "PROVENANCE_INCOMPLETE,LABEL_MISMATCH");
    /* room for the first name only */
    guard_codes_format(BIT(GUARD_GRANT_INVALID) | BIT(GUARD_GRAPH_ERROR), buf, 20);
    CU_ASSERT_STRING_EQUAL(buf, "GRANT_INVALID");
    guard_codes_format(BIT(GUARD_GRANT_INVALID), buf, 5);
    CU_ASSERT_STRING_EQUAL(buf, "");
}

static void test_unknown_decision_and_free(void)
{
    guard_decision d;
    memset(&d, 0xA5, sizeof d); /* overwritten, never freed */
    CU_ASSERT_EQUAL(guard_decision_unknown(&d, "graph unreachable"), 0);
    CU_ASSERT_EQUAL(d.outcome, GUARD_UNKNOWN);
    CU_ASSERT_EQUAL(d.codes, BIT(GUARD_GRAPH_ERROR));
    CU_ASSERT_STRING_EQUAL(d.witness, "graph unreachable");
    CU_ASSERT_EQUAL(d.chain_order.n, 0);
    guard_decision_free(&d);
    CU_ASSERT_PTR_NULL(d.witness);
    CU_ASSERT_EQUAL(guard_decision_unknown(&d, NULL), 0);
    CU_ASSERT_PTR_NULL(d.witness);
    guard_decision_free(&d);
    guard_decision_free(&d); /* safe on a zeroed decision */
    guard_decision_free(NULL);
}

static void test_research_step_reads_vendor_summary_only(void)
{
    /* the research step receives nothing budget-derived: its own summary passes, the
     * recommendation does not */
    guard_stepcap cap = research_cap();
    guard_context ctx = context_of("c1", "research", "researcher");
    anc_builder anc;
    summary_ancestry(&anc);
    input_expect(&cap, &ctx, &anc, GUARD_ALLOW, 0, NULL);
    anc_free(&anc);
    recommendation_ancestry(&anc);
    input_expect(&cap, &ctx, &anc, GUARD_DENY, BIT(GUARD_INPUT_OUT_OF_SCOPE),
                 "budget (confidential)" ARROW "Internal recommendation" ARROW
                 "research step {vendor_a, vendor_b, vendor_c}");
    anc_free(&anc);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* The input gate from a lineage summary (RULE-INPUT-PROVENANCE, RULE-INPUT-LABELS,
 * RULE-INPUT-SCOPE): a verified summary whose payload's own edges and sources' labels agree
 * is allowed; an unverified one is UNKNOWN; a deleted own edge, a relabelled source and a
 * source outside the step each refuse it. */
static void test_input_from_a_summary(void)
{
    guard_stepcap cap = report_cap();
    guard_context ctx = context_of("c4", "report", "reporter");
    guard_resource was[1] = {{"vendor_a", "", 0, 1, NULL, NULL}};
    guard_resource now[1] = {{"vendor_a", "", 0, 1, NULL, NULL}};
    guard_summary s = {0};
    s.id = "a9";
    s.verified = true;
    s.run_id = RUN;
    s.kind = "derived";
    s.resource = "";
    s.conf = 0;
    s.integrity = 1;
    s.ok = true;
    s.parents = STRS("a7", "a8");
    s.sources = was;
    s.n_sources = 1;
    s.now_run_id = RUN;
    s.now_kind = "derived";
    s.now_hash = "a665a45920422f9d417e4867efdc4fb8a04a1f3fff1fa07e998e86f7f7a27ae3";
    s.now_conf = 0;
    s.now_integrity = 1;
    s.now_parents = STRS("a7", "a8");
    s.now_producers = STRS("c2");
    s.now_sources = now;
    s.n_now_sources = 1;
    guard_decision d;
    CU_ASSERT_EQUAL(guard_check_input_summary(&cap, &ctx, RUN, &s, &d), 0);
    expect(&d, GUARD_ALLOW, 0, NULL);
    EXPECT_STRS(&d.sources, "vendor_a");
    guard_decision_free(&d);

    s.verified = false;
    CU_ASSERT_EQUAL(guard_check_input_summary(&cap, &ctx, RUN, &s, &d), 0);
    expect(&d, GUARD_UNKNOWN, 1u << GUARD_GRAPH_ERROR,
           "the lineage summary of a9 does not hash to its summary_hash");
    guard_decision_free(&d);
    /* charterd's reason when it found the summary unusable (no summary, no seal) */
    s.unverified = "the lineage summary of a9 carries no seal of this charterd's integrity key";
    CU_ASSERT_EQUAL(guard_check_input_summary(&cap, &ctx, RUN, &s, &d), 0);
    expect(&d, GUARD_UNKNOWN, 1u << GUARD_GRAPH_ERROR,
           "the lineage summary of a9 carries no seal of this charterd's integrity key");
    guard_decision_free(&d);
    s.unverified = NULL;
    s.verified = true;

    guard_strs kept = s.now_parents;
    s.now_parents = STRS("a7");
    CU_ASSERT_EQUAL(guard_check_input_summary(&cap, &ctx, RUN, &s, &d), 0);
    expect(&d, GUARD_DENY, 1u << GUARD_PROVENANCE_INCOMPLETE,
           "a9's DERIVED_FROM edges are not the parents its lineage summary names");
    guard_decision_free(&d);
    strs_free(&s.now_parents);
    s.now_parents = kept;

    now[0].conf = 2;
    CU_ASSERT_EQUAL(guard_check_input_summary(&cap, &ctx, RUN, &s, &d), 0);
    expect(&d, GUARD_DENY, 1u << GUARD_LABEL_MISMATCH,
           "resource vendor_a was public, trusted when a9 was derived; now confidential, trusted");
    guard_decision_free(&d);
    now[0].conf = 0;

    was[0].id = now[0].id = "budget";
    CU_ASSERT_EQUAL(guard_check_input_summary(&cap, &ctx, RUN, &s, &d), 0);
    expect(
        &d, GUARD_DENY, 1u << GUARD_INPUT_OUT_OF_SCOPE,
        "budget (public) \xe2\x86\x92 a9 \xe2\x86\x92 report step {vendor_a, vendor_b, vendor_c}");
    guard_decision_free(&d);

    strs_free(&s.parents);
    strs_free(&s.now_parents);
    strs_free(&s.now_producers);
    strs_free(&ctx.owners);
    cap_free(&cap);
}

/* ---------------------------------------------------------------------------------------- */

#define T(f)                                                                                       \
    {                                                                                              \
#f, f                                                                                      \
    }
static const harness_test tests[] = {
    T(test_input_from_a_summary),
    T(test_cfo_delivery_of_recommendation_is_allowed),
    T(test_delivery_through_a_live_tool_is_not_permitted),
    T(test_witness_escapes_control_characters),
    T(test_public_delivery_from_vendor_pages_and_summary_is_allowed),
    T(test_handoff_from_budget_is_denied_with_witness),
    T(test_handoff_of_summary_to_analyst_is_allowed),
    T(test_budget_source_itself_into_report_step_is_denied),
    T(test_revoked_reporter_grant_denies_public_delivery),
    T(test_research_step_reads_vendor_summary_only),
    T(test_tool_outside_step_is_step_mismatch),
    T(test_recipient_outside_step_is_step_mismatch),
    T(test_grant_other_than_the_steps_is_step_mismatch),
    T(test_context_owned_by_another_actor_is_identity_mismatch),
    T(test_context_of_another_step_or_run_is_step_mismatch),
    T(test_relabeled_artifact_is_label_mismatch),
    T(test_relabeled_source_is_label_mismatch),
    T(test_laundered_integrity_is_label_mismatch),
    T(test_cross_run_input_is_provenance_incomplete),
    T(test_hidden_second_parent_is_provenance_incomplete),
    T(test_recorded_input_without_edge_is_provenance_incomplete),
    T(test_missing_parent_artifact_is_provenance_incomplete),
    T(test_payload_absent_from_ancestry_is_provenance_incomplete),
    T(test_malformed_artifacts_are_provenance_incomplete),
    T(test_lineage_cycle_is_provenance_incomplete),
    T(test_truncated_ancestry_is_unknown),
    T(test_missing_facts_are_unknown),
    T(test_clearance_exceeded_names_the_path_to_the_budget),
    T(test_internal_clearance_below_confidential_payload_is_exceeded),
    T(test_handoff_published_by_reporter_collects_every_code),
    T(test_resource_outside_a_grant_of_the_chain_is_out_of_scope),
    T(test_resource_outside_the_step_is_out_of_scope),
    T(test_grant_not_covering_the_tool_is_grant_invalid),
    T(test_valid_chain_is_allowed_leaf_first),
    T(test_root_grant_issued_by_agent_is_grant_invalid),
    T(test_revoked_ancestor_grant_is_grant_invalid),
    T(test_expired_grant_is_grant_invalid),
    T(test_grant_not_yet_valid_is_grant_invalid),
    T(test_branched_chain_is_grant_invalid),
    T(test_grant_cycle_is_grant_invalid),
    T(test_incomplete_or_malformed_chain_is_grant_invalid),
    T(test_leaf_grantee_not_the_actor_is_identity_mismatch),
    T(test_missing_grant_is_grant_not_found),
    T(test_host_credential_of_another_actor_is_identity_mismatch),
    T(test_several_faults_collect_codes_and_witness_follows_priority),
    T(test_ten_thousand_deep_lineage_is_judged_without_recursion),
    T(test_wide_ancestry_witness_takes_the_shortest_path),
    T(test_code_and_outcome_names_round_trip),
    T(test_codes_format_writes_whole_names),
    T(test_unknown_decision_and_free),
};

static const harness_suite suites[] = {
    {"guard", NULL, NULL, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
