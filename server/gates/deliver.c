/*
 * deliver.c - the delivery protocol: look the invocation up, evaluate, commit conditionally.
 *
 * The database decides, not this process: the guard's ALLOW only licenses an attempt at
 * charter_commit_delivery, which re-checks the payload bytes, the grant chain and the
 * invocation ID on the database clock inside one atomic call. Any number of charterd processes
 * may run this code against one Redis; no process-local lock decides anything. The deciding
 * half is evaluator_delivery_decide, which replay runs again over the recorded snapshot. A
 * committed delivery gets its receipt (when charterd has an integrity key) right after the
 * commit.
 */
#include "gates/deliver.h"
#include "core/digest.h"

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gates/approval.h"
#include "gates/archived.h"
#include "gates/deliver_cache.h"
#include "evidence/archive.h"
#include "evidence/evlog.h"
#include "core/ids.h"
#include "db/lineage.h"
#include "evidence/receipt_issue.h"
#include "policy/evaluator.h"
#include "core/invariant.h"

void deliver_fingerprint(const char *run_id, const char *payload_hash, const char *recipient,
                         const char *tool, const char *grant, char hex[65])
{
    const char *parts[5] = {run_id, payload_hash, recipient, tool, grant};
    size_t total = 0;
    for (int i = 0; i < 5; i++)
        total += 12 + strlen(parts[i]);
    char *buf = malloc(total + 1);
    if (!buf) {
        memset(hex, '0', 64);
        hex[64] = '\0';
        return;
    }
    size_t off = 0;
    for (int i = 0; i < 5; i++)
        off += (size_t)snprintf(buf + off, total + 1 - off, "%zu:%s", strlen(parts[i]), parts[i]);
    gate_sha256_hex(buf, off, hex);
    free(buf);
}

void deliver_result_free(deliver_result *r)
{
    guard_decision_free(&r->decision);
    json_decref(r->delivery);
    r->delivery = NULL;
    r->acknowledged = false;
    r->durable = false;
    json_decref(r->approval);
    r->approval = NULL;
    json_decref(r->archive_owners);
    r->archive_owners = NULL;
    r->not_found[0] = '\0';
}

static int find_delivery(const gate_env *g, const char *inv, json_t **delivery)
{
    *delivery = NULL;
    int rc = q_find_delivery(g->st, inv, delivery);
    if (rc == STATUS_OK && *delivery && !json_is_object(*delivery)) {
        json_decref(*delivery);
        *delivery = NULL;
    }
    return rc;
}

/* An invocation whose run was archived answers from the record the run left
 * (charter_remove_run): acknowledged when this send is the one committed (its digest, over the
 * context, payload, recipient and tool, archive_send_digest, is the record's), DELIVERY_CONFLICT
 * otherwise. Nothing is delivered again. Takes the reference to record. */
static void answer_archived(deliver_result *out, json_t *record, const char *digest)
{
    const char *kept = json_string_value(json_object_get(record, "request"));
    guard_decision_free(&out->decision);
    if (kept != NULL && digest[0] != '\0' && strcmp(kept, digest) == 0) {
        out->decision.outcome = GUARD_ALLOW;
        out->delivery = record;
        out->acknowledged = true;
        return;
    }
    out->decision.outcome = GUARD_DENY;
    out->decision.codes = 1u << GUARD_DELIVERY_CONFLICT;
    const char *inv = json_string_value(json_object_get(record, "invocation_id"));
    const char *run = json_string_value(json_object_get(record, "run_id"));
    char buf[320];
    snprintf(buf, sizeof buf, "invocation %s was committed with other content by run %s (archived)",
             inv ? inv : "?", run ? run : "?");
    out->decision.witness = strdup(buf);
    json_decref(record);
}

/* An existing delivery answers the send: acknowledged when it is this very send (same run and
 * fingerprint; for an archived run's record, the same send digest), DELIVERY_CONFLICT
 * otherwise: another run's delivery under the same invocation ID never counts as this run's
 * send. Takes the reference to existing. */
static void answer_existing(deliver_result *out, json_t *existing, const char *fingerprint,
                            const char *run_id, const char *digest)
{
    if (json_is_true(json_object_get(existing, "archived"))) {
        answer_archived(out, existing, digest);
        return;
    }
    const char *fp = json_string_value(json_object_get(existing, "fingerprint"));
    const char *owner = json_string_value(json_object_get(existing, "run_id"));
    bool same_run = owner && run_id && strcmp(owner, run_id) == 0;
    guard_decision_free(&out->decision);
    if (same_run && fp && strcmp(fp, fingerprint) == 0) {
        out->decision.outcome = GUARD_ALLOW;
        out->delivery = existing;
        out->acknowledged = true;
    } else {
        out->decision.outcome = GUARD_DENY;
        out->decision.codes = 1u << GUARD_DELIVERY_CONFLICT;
        const char *inv = json_string_value(json_object_get(existing, "invocation_id"));
        char buf[256];
        if (same_run)
            snprintf(buf, sizeof buf, "invocation %s was committed with other content",
                     inv ? inv : "?");
        else
            snprintf(buf, sizeof buf, "invocation %s was committed by another run",
                     inv ? inv : "?");
        out->decision.witness = strdup(buf);
        json_decref(existing);
    }
}

static double number_of(const json_t *j)
{
    if (json_is_string(j))
        return strtod(json_string_value(j), NULL);
    return json_number_value(j);
}

static json_t *strs_json(const guard_strs *s)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < s->n; i++)
        if (json_array_append_new(list, json_string(s->items[i]))) {
            json_decref(list);
            return NULL;
        }
    return list;
}

/* Records a decision that has no effect. If it cannot be recorded, it becomes UNKNOWN. */
static void record(const gate_env *g, const char *run_id, const char *fingerprint,
                   guard_decision *d, json_t *detail, json_t *snapshot)
{
    evlog_owned ev;
    int rc = evlog_owned_event(&ev, "delivery_decided", d, fingerprint, detail, snapshot);
    if (rc == STATUS_OK)
        rc = evlog_append(g->st, run_id, &ev.ev, NULL);
    evlog_owned_free(&ev);
    if (rc != STATUS_OK && d->outcome != GUARD_UNKNOWN) {
        guard_decision_free(d);
        guard_decision_unknown(d, "the decision could not be recorded");
    }
}

/* The facts of one send: the context, the run's head and everything else in one
 * charter_delivery_facts call, read by the database at one instant. */
typedef struct {
    guard_context ctx;
    const workflow *wf;        /* the workflow the context acts under */
    const workflow_step *step; /* its step, narrowed to the context's scope */
    char fingerprint[65];      /* the evaluator's under wf ("" when unknown) */
    json_t *reply;             /* the delivery_facts reply; the json_t below borrow from it */
    json_t *payload;           /* the payload artifact, with content */
    json_t *existing;          /* the invocation's delivery, or NULL */
    json_t *archived;          /* the record its archived run left of it, or NULL */
    json_t *ancestry;          /* the ancestry walked for a refusal's witness, or NULL */
    json_t *summary;           /* raw lineage summary facts, or NULL */
    json_t *walked;            /* the ancestry walked for a refusal's witness (owned), or NULL */
    bool has_sum;              /* sum holds the payload's summary facts */
    guard_summary sum;
    json_t *chain;     /* raw grant chain */
    json_t *recipient; /* or NULL when unknown */
    double now;
    guard_ancestry anc;
    guard_chain gchain;
    evlog_head head; /* the context's run's head, as read with the facts */
    bool have_head;
} send_facts;

static void facts_free(send_facts *f)
{
    facts_context_free(&f->ctx);
    json_decref(f->reply);
    json_decref(f->walked);
    facts_summary_free(&f->sum);
    facts_ancestry_free(&f->anc);
    facts_chain_free(&f->gchain);
}

/* Fetches every fact of the send in one read: the context (checked as gate_context_of does),
 * the run's head, the payload, the invocation's delivery, its lineage summary, the chain of
 * grant ("": the grant the context recorded, a hint checked here against its step) and the
 * recipient. *ctx_ok tells whether the context was read and usable; *regrant that the chain
 * read is not of the step's grant, so the read must be made again naming it. A payload
 * without a summary, or whose summary is not sealed under the integrity key, is marked
 * unverified (gate_summary_verify): the guard answers UNKNOWN. Returns STATUS_OK, STATUS_ENOTFOUND
 * (context or payload), STATUS_EREFUSED (a completed run, unless the invocation is one it
 * committed: its delivery answers), or the failure of the store or of gate_context_closed. */
static int gather(const gate_env *g, const char *context_id, const char *invocation_id,
                  const char *payload_id, const char *recipient, const char *grant, send_facts *f,
                  bool *ctx_ok, bool *regrant)
{
    *ctx_ok = false;
    *regrant = false;
    facts_free(f);
    memset(f, 0, sizeof *f);
    int rc =
        q_delivery_facts(g->st, invocation_id, payload_id, grant, recipient, context_id, &f->reply);
    if (rc != STATUS_OK)
        return rc;
    f->archived = json_object_get(f->reply, "archived");
    if (json_is_object(f->archived))
        return STATUS_OK; /* the run left with its context: the record answers (send_lookup) */
    f->archived = NULL;
    json_t *raw = json_object_get(f->reply, "context");
    bool closed = false;
    rc = gate_context_closed(g, json_incref(raw), &f->wf, &f->step, &f->ctx, &closed);
    if (rc != STATUS_OK)
        return rc;
    /* A completed run's record is closed, but a retry of a send it committed before it was
     * completed still learns of its delivery (answered from it, writing nothing). */
    if (closed && !json_is_object(json_object_get(f->reply, "delivery"))) {
        facts_context_free(&f->ctx);
        f->step = NULL;
        f->wf = NULL;
        return STATUS_EREFUSED;
    }
    *ctx_ok = true;
    if (json_is_true(json_object_get(f->reply, "payload_missing")))
        return STATUS_ENOTFOUND;
    f->have_head = evlog_head_parse(json_object_get(f->reply, "head"), &f->head) == STATUS_OK;
    f->payload = json_object_get(f->reply, "payload");
    if (!json_is_object(f->payload))
        return STATUS_EPROTO;
    f->existing = json_object_get(f->reply, "delivery");
    if (!json_is_object(f->existing))
        f->existing = NULL;
    f->now = number_of(json_object_get(f->reply, "now"));
    store_note_time(g->st, json_string_value(json_object_get(f->reply, "now")));
    if (f->existing)
        return STATUS_OK;
    f->chain = json_object_get(f->reply, "chain");
    f->recipient = json_object_get(f->reply, "recipient");
    if (!json_is_object(f->recipient))
        f->recipient = NULL;
    const char *read = json_string_value(json_object_get(f->reply, "grant"));
    if (!read || strcmp(read, f->step->cap.grant) != 0) {
        *regrant = true;
        return STATUS_OK;
    }
    /* RULE-INPUT-SUMMARY, as at the input gate: the payload is decided from its summary, and
     * one that is missing or, under a key, unsealed is marked unverified (UNKNOWN, with its
     * snapshot), never decided from the ancestry in its place:
     * whoever can delete a summary could otherwise have a delivery decided from edges edited
     * below it. */
    f->summary = json_object_get(f->reply, "summary");
    if (!facts_is_summary(f->summary) &&
        json_object_set_new(f->reply, "summary", json_pack("{s:s}", "id", payload_id)) != 0)
        return STATUS_ENOMEM;
    f->summary = json_object_get(f->reply, "summary");
    if (gate_summary_verify(f->summary) != 0)
        return STATUS_ENOMEM;
    rc = facts_summary_from_json(f->summary, payload_id, &f->sum);
    f->has_sum = rc == STATUS_OK;
    if (rc == STATUS_OK)
        rc = facts_chain_from_json(f->chain, f->step->cap.grant, &f->gchain);
    return rc;
}

/* Every fact the decision is made from, for replay: content_hash is the hex SHA-256 of the
 * payload's stored content as read ("" when there was none). */
/* by_ref: the ancestry is named by its lineage reference (lineage.h), its new records stored
 * before the event (with the commit, or by lineage_keep); else it is kept whole, as when the
 * reply named no lineage. */
static json_t *snapshot_of(const send_facts *f, const guard_delivery_request *req,
                           const char *payload_hash, const char *content_hash, bool by_ref)
{
    json_t *ancestry = NULL;
    const char *lineage_key = "ancestry";
    if (req->summary != NULL) {
        lineage_key = "summary"; /* the summary, its hash and the facts read beside it */
        ancestry = json_incref(f->summary);
    } else if (by_ref && json_is_object(f->ancestry)) {
        ancestry = lineage_ref(f->ancestry);
    }
    if (ancestry == NULL)
        ancestry = json_incref(f->ancestry);
    json_t *owners = strs_json(&f->ctx.owners);
    json_t *snap = json_pack(
        "{s:s, s:s, s:s, s:o*, s:{s:s, s:s, s:s, s:o*}, "
        "s:{s:s, s:s, s:s, s:i, s:s, s:s}, s:o, s:O, s:f, s:{s:s, s:s, s:s}, s:i}",
        "gate", "delivery", "workflow", f->wf ? f->wf->version : "", "step", f->step->cap.step,
        "cap", evaluator_cap_json(&f->step->cap), "context", "id", f->ctx.id, "run_id",
        f->ctx.run_id, "step", f->ctx.step, "owners", owners, "request", "run_id", req->run_id,
        "payload_id", req->payload_id, "recipient", req->recipient, "recipient_clearance",
        req->recipient_clearance, "tool", req->tool, "grant", req->grant, lineage_key, ancestry,
        "chain", f->chain, "now", f->now, "payload", "id", req->payload_id, "hash", payload_hash,
        "content_sha256", content_hash, "evaluator_version", EVALUATOR_VERSION);
    /* Recorded only when set, so every snapshot before the rule reads as it did. */
    if (snap != NULL && req->live_tool &&
        json_object_set_new(json_object_get(snap, "request"), "live_tool", json_true()) != 0) {
        json_decref(snap);
        snap = NULL;
    }
    return snap;
}

/* One send in progress: the request, the facts and what the phases build from them. Every
 * pointer is owned here (or borrowed from f.reply) and released by send_free alone. */
typedef struct {
    const gate_env *g;
    const char *context_id, *payload_id, *recipient, *tool, *invocation_id;
    send_facts f;
    json_t *detail;           /* the event detail every record of this send carries */
    const char *payload_hash; /* the payload's recorded hash (borrowed from f.reply), or NULL */
    const char *content;      /* its stored bytes (borrowed from f.reply), or NULL */
    char fingerprint[65];     /* the send's fingerprint (deliver_fingerprint) */
    char digest[65];          /* its digest as an archive keeps it (archive_send_digest) */
    guard_delivery_request req;
    char actual[65]; /* hex SHA-256 of content as read ("" without content) */
    json_t *snapshot;
    evlog_owned ev; /* the delivery_decided event the commit writes */
    json_t *arg;    /* the commit's argument */
    char *facts;    /* the facts record ev's snapshot names (evlog_facts_split), or NULL */
    char facts_sha[65];
    char *arg_text; /* the commit's argument as sent */
    /* What the commit and its records name, from the facts read or the cache: the run, the
     * evaluator fingerprint ("" when unknown) and the head the event is sealed on. */
    const char *run_id;
    const char *evaluator;
    evlog_head head;
    bool have_head;
    /* The cached path (send_cached): the entry it decided from, borrowed, and the decision's
     * time on the database clock as this worker knows it. */
    const deliver_cached *cached;
    char decided_at[32];
    bool committed; /* this send's commit wrote the delivery */
    bool fall_back; /* the cached path was tried and answered nothing: read afresh */
    bool done;      /* a phase answered the send: out is final */
} send_state;

/* The event detail every record of the send carries, under step (new reference, or NULL). */
static json_t *send_detail(const send_state *s, const workflow_step *step)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "context", s->context_id, "step",
                     step->cap.step, "payload", s->payload_id, "recipient", s->recipient, "tool",
                     s->tool, "invocation_id", s->invocation_id);
}

static void send_free(send_state *s, deliver_result *out)
{
    /* chain_order and sources borrow from the facts freed below; nobody reads them later. */
    free(out->decision.chain_order.items);
    free(out->decision.sources.items);
    memset(&out->decision.chain_order, 0, sizeof out->decision.chain_order);
    memset(&out->decision.sources, 0, sizeof out->decision.sources);
    evlog_owned_free(&s->ev);
    json_decref(s->arg);
    free(s->arg_text);
    free(s->facts);
    json_decref(s->snapshot);
    json_decref(s->detail);
    facts_free(&s->f);
}

/* 1a. A context the database does not have, as the facts read said (no reply): it may be one
 * of a run that was archived and left with its contexts. With an archive folder, the run's
 * archive answers (archived.h). Returns STATUS_OK (s->done, out answered) or
 * STATUS_ENOTFOUND (out->not_found says why when the archive was looked in), STATUS_ENOMEM. */
static int send_archived(send_state *s, deliver_result *out)
{
    if (s->g->archive_dir == NULL)
        return STATUS_ENOTFOUND;
    archived_request req = {
        .context_id = s->context_id, .invocation_id = s->invocation_id, .digest = s->digest};
    int rc = archived_answer(s->g, &req, &out->decision, &out->delivery, &out->archive_owners,
                             out->not_found, sizeof out->not_found);
    if (rc == STATUS_EUNAVAILABLE) {
        guard_decision_unknown(&out->decision, "the archive folder could not be read");
        rc = STATUS_OK;
    }
    if (rc == STATUS_OK) {
        out->acknowledged = out->decision.outcome == GUARD_ALLOW;
        s->done = true;
    }
    return rc;
}

/* 1. Lookup: every fact in one read (the context with them, and the run's head the commit
 * seals on; a second read only when the context recorded no grant or another one than its
 * step's); an invocation already committed answers for itself, even after a revocation.
 * Returns STATUS_OK (s->done when out is final) or the failure deliver_send returns. */
static int send_lookup(send_state *s, deliver_result *out)
{
    const gate_env *g = s->g;
    bool ctx_ok = false, regrant = false;
    int rc = gather(g, s->context_id, s->invocation_id, s->payload_id, s->recipient, "", &s->f,
                    &ctx_ok, &regrant);
    if (rc == STATUS_OK && s->f.archived) {
        answer_archived(out, json_incref(s->f.archived), s->digest);
        s->done = true;
        return STATUS_OK;
    }
    if (rc == STATUS_OK && regrant)
        rc = gather(g, s->context_id, s->invocation_id, s->payload_id, s->recipient,
                    s->f.step->cap.grant, &s->f, &ctx_ok, &regrant);
    if (rc == STATUS_OK && regrant)
        rc = STATUS_EPROTO; /* the chain read was not of the grant named */
    if (!ctx_ok && rc == STATUS_ENOTFOUND && s->f.reply == NULL)
        return send_archived(s, out);
    if (!ctx_ok && (rc == STATUS_ENOTFOUND || rc == STATUS_ENOMEM || rc == STATUS_EREFUSED))
        return rc;
    if (!ctx_ok) {
        guard_decision_unknown(&out->decision, "the graph could not supply the context");
        s->done = true;
        return STATUS_OK;
    }
    if (s->f.wf == NULL || evaluator_fingerprint(s->f.wf, s->f.fingerprint) != 0)
        s->f.fingerprint[0] = '\0';
    s->run_id = s->f.ctx.run_id;
    s->evaluator = s->f.fingerprint;
    s->head = s->f.head;
    s->have_head = s->f.have_head;
    if ((s->detail = send_detail(s, s->f.step)) == NULL)
        return STATUS_ENOMEM;
    if (rc == STATUS_ENOTFOUND || rc == STATUS_ENOMEM)
        return rc;
    if (rc != STATUS_OK) {
        /* An operational failure: no facts, so no snapshot to replay. */
        guard_decision_unknown(&out->decision, "the graph could not supply the facts");
        record(g, s->f.ctx.run_id, s->f.fingerprint, &out->decision, s->detail, NULL);
        s->done = true;
        return STATUS_OK;
    }
    s->payload_hash = json_string_value(json_object_get(s->f.payload, "hash"));
    s->content = json_string_value(json_object_get(s->f.payload, "content"));
    deliver_fingerprint(s->f.ctx.run_id, s->payload_hash ? s->payload_hash : "", s->recipient,
                        s->tool, s->f.step->cap.grant, s->fingerprint);
    if (s->f.existing) {
        answer_existing(out, json_incref(s->f.existing), s->fingerprint, s->f.ctx.run_id,
                        s->digest);
        s->done = true;
    }
    return STATUS_OK;
}

/* 2. Evaluate: the guard over the facts, with the snapshot replay decides from. A refusal is
 * recorded with its snapshot and answers the send. Returns STATUS_OK or STATUS_ENOMEM. */
static int send_evaluate(send_state *s, deliver_result *out)
{
    s->req = (guard_delivery_request){
        .run_id = s->f.ctx.run_id,
        .payload_id = (char *)s->payload_id,
        .recipient = (char *)s->recipient,
        .recipient_clearance = -1,
        .tool = (char *)s->tool,
        .grant = s->f.step->cap.grant,
        .live_tool = workflow_live_tool(s->f.wf, s->tool) != NULL,
    };
    if (s->f.recipient) {
        json_t *cl = json_object_get(s->f.recipient, "clearance");
        s->req.recipient_clearance = (int)number_of(cl);
        if (!json_is_string(cl) && !json_is_number(cl))
            s->req.recipient_clearance = -1;
    }
    /* The stored bytes must still be the ones the hash was taken of (evaluator_delivery_decide
     * compares them). */
    if (s->content)
        gate_sha256_hex(s->content, strlen(s->content), s->actual);
    s->req.summary = s->f.has_sum ? &s->f.sum : NULL;
    evaluator_delivery_decide(&s->f.step->cap, &s->f.ctx, &s->req, &s->f.anc, &s->f.gchain,
                              s->f.now, s->payload_hash, s->actual, &out->decision);
    /* The deny path: a refusal names the path from the source to the payload, which only the
     * ancestry holds. It is walked, and when it refuses too, that decision (with the walked
     * ancestry as its facts) is the one recorded; otherwise the summary's refusal stands. A
     * quarantine is never in a walked ancestry (it is read with the summary's sources): that
     * refusal is not walked, so it stands and costs the same at any depth. */
    if (s->f.has_sum && out->decision.outcome == GUARD_DENY &&
        (out->decision.codes & (1u << GUARD_RESOURCE_QUARANTINED)) == 0) {
        char limit[32];
        snprintf(limit, sizeof limit, "%zu", s->g->limits->max_ancestry);
        guard_ancestry anc = {0};
        guard_decision w = {0};
        guard_delivery_request wreq = s->req;
        wreq.summary = NULL;
        if (lineage_ancestry(s->g->st, s->payload_id, limit, &s->f.walked) == STATUS_OK &&
            facts_ancestry_from_json(s->f.walked, s->payload_id, &anc) == STATUS_OK &&
            evaluator_delivery_decide(&s->f.step->cap, &s->f.ctx, &wreq, &anc, &s->f.gchain,
                                      s->f.now, s->payload_hash, s->actual, &w) == 0 &&
            w.outcome == GUARD_DENY) {
            guard_decision_free(&out->decision);
            out->decision = w;
            memset(&w, 0, sizeof w);
            s->req = wreq;
            s->f.ancestry = s->f.walked;
        }
        guard_decision_free(&w);
        facts_ancestry_free(&anc);
    }
    /* An allowed send's new lineage records are written by its commit, in the same call as its
     * event (no write ahead of the commit); a refusal's are stored before it is recorded. */
    bool by_ref =
        out->decision.outcome == GUARD_ALLOW ||
        (json_is_object(s->f.ancestry) && lineage_keep(s->g->st, s->f.ancestry) == STATUS_OK);
    s->snapshot =
        snapshot_of(&s->f, &s->req, s->payload_hash ? s->payload_hash : "", s->actual, by_ref);
    if (!s->snapshot)
        return STATUS_ENOMEM;
    if (out->decision.outcome != GUARD_ALLOW) {
        record(s->g, s->f.ctx.run_id, s->f.fingerprint, &out->decision, s->detail, s->snapshot);
        s->done = true;
    }
    return STATUS_OK;
}

/* Milliseconds of the call's deadline held back from each commit for the lookup that follows a
 * commit whose outcome is unknown: a fifth of what remains, at most DELIVER_LOOKUP_RESERVE_MS. */
static int lookup_reserve(const store *st)
{
    int left = store_remaining_ms(st);
    int r = left / 5;
    return r < DELIVER_LOOKUP_RESERVE_MS ? r : DELIVER_LOOKUP_RESERVE_MS;
}

/* Sets out to UNKNOWN GRAPH_ERROR EFFECT_UNKNOWN: a commit was sent and its outcome is not
 * known. Never a claim of no effect. */
static void answer_effect_unknown(deliver_result *out, const char *invocation_id)
{
    char buf[320];
    snprintf(buf, sizeof buf,
             "the commit of invocation %s was sent and its outcome is unknown; it may have "
             "landed: retry with the same invocation ID to learn its outcome (an identical "
             "retry is acknowledged, never delivered twice)",
             invocation_id);
    guard_decision_free(&out->decision);
    guard_decision_unknown(&out->decision, buf);
    out->decision.codes |= 1u << GUARD_EFFECT_UNKNOWN;
}

/* With --durable-ack N, waits (WAIT, on the connection the commit ran on, within what remains
 * of the call's deadline) for N replicas to confirm the commit. The delivery stands either
 * way (it is committed on the master); when fewer confirm, the answer says so in the witness
 * and durable stays false: the effect is not yet known to survive the master's loss. */
static void note_durability(const gate_env *g, deliver_result *out)
{
    int want = g->limits ? g->limits->durable_ack : 0;
    if (want <= 0)
        return;
    int confirmed = 0;
    int rc = store_wait_replicas(g->st, want, &confirmed);
    out->durable = rc == STATUS_OK && confirmed >= want;
    if (out->durable)
        return;
    char note[200];
    if (rc == STATUS_OK)
        snprintf(note, sizeof note,
                 "committed, not yet durable: %d of %d replicas confirmed within the deadline",
                 confirmed, want);
    else
        snprintf(note, sizeof note,
                 "committed, not yet durable: the replicas could not be asked (%d wanted)", want);
    char *w = strdup(note);
    if (w) {
        free(out->decision.witness);
        out->decision.witness = w;
    }
}

/* True when the string field key of obj is exactly want. */
static bool deliver_same(const json_t *obj, const char *key, const char *want)
{
    const char *v = json_string_value(json_object_get(obj, key));
    return v != NULL && want != NULL && strcmp(v, want) == 0;
}

/* The commit's argument and its delivery_decided event, into s->arg and s->ev. by_ref: the
 * event's snapshot names its facts record (s->facts, evlog_facts_split), which the commit
 * stores with it; else the snapshot is kept whole (an approval's held commit). The payload's
 * content is not sent: the commit stores the bytes it finds, once their SHA-1 is the one
 * evaluated. Returns STATUS_OK or STATUS_ENOMEM (out's decision freed). */
static int send_prepare(send_state *s, deliver_result *out, bool by_ref)
{
    if (s->arg != NULL || s->arg_text != NULL)
        return STATUS_OK;
    /* ALLOW licenses the write only of bytes whose hash matched (evaluator_delivery_decide). */
    INVARIANT(out->decision.outcome == GUARD_ALLOW && s->content != NULL &&
              s->payload_hash != NULL);
    char sha1[41];
    (void)digest_sha1_hex(s->content, strlen(s->content), sha1); /* on failure never equal */
    json_t *ref = NULL;
    int erc = by_ref ? evlog_facts_split(s->snapshot, &s->facts, s->facts_sha, &ref) : STATUS_OK;
    if (erc == STATUS_OK)
        erc = evlog_owned_event(&s->ev, "delivery_decided", &out->decision, s->f.fingerprint,
                                s->detail, ref != NULL ? ref : s->snapshot);
    json_decref(ref);
    s->arg = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o*, s:o*}", "run_id",
                       s->f.ctx.run_id, "invocation_id", s->invocation_id, "fingerprint",
                       s->fingerprint, "payload_id", s->payload_id, "payload_hash", s->payload_hash,
                       "content_sha1", sha1, "recipient", s->recipient, "tool", s->tool,
                       "grant_chain", strs_json(&out->decision.chain_order), "sources",
                       strs_json(&out->decision.sources));
    /* Decided from the payload's summary: the commit checks it and the payload's own edges are
     * still the ones evaluated. */
    if (s->arg && s->req.summary != NULL &&
        (json_object_set_new(s->arg, "summary_hash", json_string(s->f.sum.summary_hash)) != 0 ||
         json_object_set_new(s->arg, "parents", strs_json(&s->f.sum.parents)) != 0)) {
        json_decref(s->arg);
        s->arg = NULL;
    }
    /* The lineage records the snapshot names that were not stored when the facts were read. */
    const json_t *fresh = json_object_get(s->f.ancestry, "new");
    if (s->arg && json_object_size(fresh) > 0 &&
        json_object_set(s->arg, "lineage", (json_t *)fresh) != 0) {
        json_decref(s->arg);
        s->arg = NULL;
    }
    if (s->arg != NULL)
        s->arg_text = evlog_json_text(s->arg);
    if (!s->arg_text || erc != STATUS_OK) {
        guard_decision_free(&out->decision);
        return STATUS_ENOMEM;
    }
    return STATUS_OK;
}

/* 2b. Hold: a send the workflow asks a human to approve (workflow_approval_for) is stored as
 * a pending approval with the commit it would make, and answers UNKNOWN (no effect yet) with
 * the approval. A retry of the invocation finds its approval: still pending, the same answer;
 * decided, the delivery (acknowledged) or DENY naming the outcome. Only an allowed send gets
 * here: a gate's refusal never becomes an approval. Returns STATUS_OK (s->done when held) or
 * STATUS_ENOMEM. */
static int send_hold(send_state *s, deliver_result *out)
{
    /* RULE-APPROVAL-GATE-FIRST: only an ALLOW of the gate reaches here (send_evaluate answered
     * every refusal), so a refused send never becomes an approval. */
    INVARIANT(out->decision.outcome == GUARD_ALLOW);
    const char *by = NULL;
    long long within_ms = 0;
    if (!workflow_approval_for(s->f.wf, s->tool, s->recipient, &by, &within_ms))
        return STATUS_OK;
    int rc = send_prepare(s, out, false);
    if (rc != STATUS_OK)
        return rc;
    s->done = true;
    char id[36];
    approval_id_of(s->invocation_id, id);
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "kind", s->ev.ev.kind, "outcome",
                           s->ev.ev.outcome, "codes", s->ev.ev.codes ? s->ev.ev.codes : "",
                           "witness", s->ev.ev.witness ? s->ev.ev.witness : "", "detail",
                           s->ev.ev.detail ? s->ev.ev.detail : "", "snapshot",
                           s->ev.ev.snapshot ? s->ev.ev.snapshot : "", "evaluator",
                           s->ev.ev.evaluator ? s->ev.ev.evaluator : "");
    json_t *doc =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:O, s:o*}",
                  "approval_id", id, "run_id", s->f.ctx.run_id, "invocation_id", s->invocation_id,
                  "fingerprint", s->fingerprint, "approver", by, "within_ms", (json_int_t)within_ms,
                  "tool", s->tool, "recipient", s->recipient, "payload_id", s->payload_id, "step",
                  s->f.step->cap.step, "context_id", s->context_id, "commit", s->arg, "event", ev);
    json_t *detail =
        json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s}", "approval_id", id, "approver", by,
                  "within_ms", (json_int_t)within_ms, "invocation_id", s->invocation_id, "payload",
                  s->payload_id, "recipient", s->recipient, "tool", s->tool);
    evlog_owned requested;
    memset(&requested, 0, sizeof requested);
    json_t *reply = NULL;
    if (!doc || !detail ||
        evlog_owned_event(&requested, "approval_requested", NULL, NULL, detail, NULL) != 0) {
        rc = STATUS_ENOMEM;
        goto out;
    }
    rc = approval_request(s->g->st, s->f.ctx.run_id, doc, &requested.ev, &reply);
    guard_decision_free(&out->decision);
    if (rc != STATUS_OK) {
        guard_decision_unknown(&out->decision,
                               "the approval request could not be stored (or its outcome is "
                               "unknown): retry with the same invocation ID to learn it");
        rc = STATUS_OK;
        goto out;
    }
    const char *status = json_string_value(json_object_get(reply, "status"));
    json_t *approval = json_object_get(reply, "approval");
    char buf[512];
    if (status && strcmp(status, "exists") == 0) {
        answer_existing(out, json_incref(json_object_get(reply, "delivery")), s->fingerprint,
                        s->f.ctx.run_id, s->digest);
    } else if (status && strcmp(status, "conflict") == 0) {
        out->decision.outcome = GUARD_DENY;
        out->decision.codes = 1u << GUARD_DELIVERY_CONFLICT;
        snprintf(buf, sizeof buf, "invocation %s awaits approval of another send",
                 s->invocation_id);
        out->decision.witness = strdup(buf);
    } else if (status && json_is_object(approval) && strcmp(status, "pending") == 0) {
        /* The deadline as the database stored it, "<seconds>.<6 digits>", shown in UTC. */
        const char *dl = json_string_value(json_object_get(approval, "deadline"));
        time_t t = (time_t)strtoll(dl ? dl : "0", NULL, 10);
        struct tm tm;
        char until[32];
        if (gmtime_r(&t, &tm) == NULL ||
            strftime(until, sizeof until, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
            snprintf(until, sizeof until, "%s", dl ? dl : "?");
        snprintf(buf, sizeof buf,
                 "awaiting approval %s by %s until %s: nothing is delivered "
                 "unless %s approves before then",
                 json_string_value(json_object_get(approval, "id")), by, until, by);
        guard_decision_unknown(&out->decision, buf);
        out->decision.codes = 0;
        out->approval = json_incref(approval);
    } else if (status && json_is_object(approval) &&
               (strcmp(status, "denied") == 0 || strcmp(status, "expired") == 0 ||
                strcmp(status, "refused") == 0)) {
        const char *r = json_string_value(json_object_get(approval, "reason"));
        snprintf(buf, sizeof buf, "approval %s was %s%s%s",
                 json_string_value(json_object_get(approval, "id")), status, r && *r ? ": " : "",
                 r ? r : "");
        out->decision.outcome = GUARD_DENY;
        out->decision.witness = strdup(buf);
        out->approval = json_incref(approval);
    } else {
        guard_decision_unknown(&out->decision, "the approval request got an unexpected reply");
    }
out:
    json_decref(reply);
    json_decref(doc);
    json_decref(detail);
    evlog_owned_free(&requested);
    return rc;
}

/* The witness of a commit the conditional write refused (reply {"status":"refused","reason",
 * "detail"}), into buf: "the conditional write was refused: <check>". The delivery budget is
 * said in words: the run has used it up, so no send of the run commits any more. */
static void refusal_witness(const json_t *reply, const char *run_id, char *buf, size_t n)
{
    const char *reason = json_string_value(json_object_get(reply, "reason"));
    const char *detail = json_string_value(json_object_get(reply, "detail"));
    const char *max = detail ? strstr(detail, " max_deliveries ") : NULL;
    if (reason && strcmp(reason, "budget_deliveries") == 0 && max)
        snprintf(buf, n,
                 "the conditional write was refused: budget_deliveries: run %.64s has used up "
                 "its max_deliveries budget of %.20s; nothing was delivered",
                 run_id ? run_id : "", max + strlen(" max_deliveries "));
    else
        snprintf(buf, n, "the conditional write was refused: %s",
                 reason ? reason : "unknown reason");
}

/* The delivery the cached path just committed, as a committed JSON reply shows one: every
 * field is what the commit was sent but its event's seq and its time (seq and committed_at,
 * as the list reply gave them). New reference, or NULL when memory ran out. */
static json_t *cached_delivery(const send_state *s, const deliver_result *out, const char *seq,
                               const char *committed_at)
{
    const deliver_cached *e = s->cached;
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o*, s:s, s:I, s:s}",
                     "invocation_id", s->invocation_id, "run_id", e->ctx.run_id, "fingerprint",
                     e->fingerprint, "recipient", s->recipient, "tool", s->tool, "payload_id",
                     s->payload_id, "payload_hash", e->payload_hash, "content", e->content,
                     "grant_chain", strs_json(&out->decision.chain_order), "committed_at",
                     committed_at, "event_seq", (json_int_t)strtoll(seq, NULL, 10), "evaluator",
                     s->ev.ev.evaluator != NULL ? s->ev.ev.evaluator : "");
}

/* A commit that wrote the delivery answers the send with it (from the JSON reply, or, for the
 * cached path's list ["committed", seq, committed_at], from what was sent), waits for its
 * durability and signs its receipt. Returns STATUS_OK or STATUS_ENOMEM (the delivery is
 * committed; a retry of the invocation is acknowledged). */
static int send_committed(send_state *s, deliver_result *out, const json_t *reply,
                          const store_list *list)
{
    const gate_env *g = s->g;
    if (list != NULL) {
        const char *seq = store_list_get(list, 1, NULL);
        const char *at = store_list_size(list) > 2 ? store_list_get(list, 2, NULL) : NULL;
        out->delivery = seq != NULL && at != NULL ? cached_delivery(s, out, seq, at) : NULL;
        store_note_time(g->st, at);
        if (out->delivery == NULL)
            return STATUS_ENOMEM;
    } else {
        out->delivery = json_incref(json_object_get(reply, "delivery"));
        store_note_time(g->st, json_string_value(json_object_get(out->delivery, "committed_at")));
    }
    s->committed = true;
    /* The other half of the commit's own check: what the database wrote is this invocation,
     * with the fingerprint that was evaluated. */
    INVARIANT(out->delivery != NULL &&
              deliver_same(out->delivery, "invocation_id", s->invocation_id) &&
              deliver_same(out->delivery, "fingerprint", s->fingerprint));
    note_durability(g, out);
    /* The receipt, signed right after the commit. A failure here loses nothing:
     * Evidence/GetReceipt issues it from the stored delivery later. */
    json_t *receipt = NULL;
    if (evlog_keyed())
        (void)receipt_issue_delivery(g->st, out->delivery, &receipt);
    json_decref(receipt);
    return STATUS_OK;
}

/* The commit was refused: the facts changed between evaluation and commit (revocation,
 * expiry, altered payload). Fail closed; this is an operational outcome, no snapshot. An
 * earlier attempt of ours that may still land later would be refused the same way by the
 * database (the facts it re-checks only move one way until restored), but it is not known to
 * have been: say so. The cached path, with no attempt left unanswered, answers nothing: the
 * send is read afresh and decided again (s->fall_back). */
static void send_refused(send_state *s, deliver_result *out, const json_t *reply, bool maybe_landed)
{
    guard_decision_free(&out->decision);
    if (s->cached != NULL && !maybe_landed) {
        s->fall_back = true;
        return;
    }
    const char *reason = json_string_value(json_object_get(reply, "reason"));
    char buf[256];
    refusal_witness(reply, s->run_id, buf, sizeof buf);
    snprintf(out->refused, sizeof out->refused, "%s", reason ? reason : "");
    if (maybe_landed)
        answer_effect_unknown(out, s->invocation_id);
    else
        guard_decision_unknown(&out->decision, buf);
    record(s->g, s->run_id, s->evaluator, &out->decision, s->detail, NULL);
}

/* 3. Commit with retry: the conditional write on the database clock, up to DELIVER_ATTEMPTS
 * times. Each commit gets what remains of the call's deadline minus a reserve; a commit whose
 * outcome is unknown (sent, no reply) is followed by a lookup of the invocation on a fresh
 * connection within that reserve: found, it answers (acknowledged); absent proves nothing (the
 * commit may still sit in a paused server's socket), so the commit is sent again (it is
 * idempotent: a second one answers "exists"). If no attempt learns the outcome, the answer is
 * UNKNOWN EFFECT_UNKNOWN when any commit was sent unanswered, plain UNKNOWN GRAPH_ERROR (no
 * effect) only when none was. A refused write is UNKNOWN GRAPH_ERROR (send_refused). Returns
 * STATUS_OK or STATUS_ENOMEM. */
static int send_commit(send_state *s, deliver_result *out)
{
    const gate_env *g = s->g;
    int prc = send_prepare(s, out, true);
    if (prc != STATUS_OK)
        return prc;
    const char *why = "the commit failed 3 times";
    bool maybe_landed = false; /* a commit was sent and its reply never read */
    bool answered = false;
    for (int attempt = 0; attempt < DELIVER_ATTEMPTS && !answered; attempt++) {
        json_t *reply = NULL;
        store_list *list = NULL;
        store_set_reserve(g->st, lookup_reserve(g->st));
        int rc = evlog_commit_delivery_text(
            g->st, s->run_id, s->arg_text, s->facts != NULL ? s->facts_sha : NULL, s->facts,
            &s->ev.ev, s->have_head ? &s->head : NULL, &reply, &list);
        bool unknown = rc != STATUS_OK && store_effect_unknown(g->st);
        store_set_reserve(g->st, 0);
        if (rc != STATUS_OK) {
            if (!unknown)
                continue; /* not sent, or refused by a transient error reply: no effect */
            maybe_landed = true;
            /* Learn the outcome on a fresh connection (the store reconnects). What is found
             * is a delivery of this invocation (ours or an identical caller's, which cannot
             * be told apart): acknowledged, never written twice. */
            json_t *existing = NULL;
            if (find_delivery(g, s->invocation_id, &existing) == STATUS_OK && existing) {
                guard_decision_free(&out->decision);
                answer_existing(out, existing, s->fingerprint, s->run_id, s->digest);
                answered = true;
            }
            continue;
        }
        const char *status = list != NULL ? store_list_get(list, 0, NULL)
                                          : json_string_value(json_object_get(reply, "status"));
        answered = true;
        if (status && strcmp(status, "committed") == 0) {
            prc = send_committed(s, out, reply, list);
        } else if (status && strcmp(status, "exists") == 0) {
            /* Another deliverer (or an earlier attempt of ours) committed this invocation. */
            guard_decision_free(&out->decision);
            answer_existing(out, json_incref(json_object_get(reply, "delivery")), s->fingerprint,
                            s->run_id, s->digest);
        } else {
            send_refused(s, out, reply, maybe_landed);
            why = NULL;
        }
        json_decref(reply);
        store_list_free(list);
    }
    if (out->decision.outcome == GUARD_ALLOW && !out->delivery && prc == STATUS_OK) {
        /* The event says so too: an effect-unknown record never contradicts an allow that
         * lands later; a plain UNKNOWN is recorded only when no commit was sent unanswered. */
        if (maybe_landed) {
            answer_effect_unknown(out, s->invocation_id);
        } else {
            guard_decision_free(&out->decision);
            guard_decision_unknown(&out->decision, why);
        }
        record(g, s->run_id, s->evaluator, &out->decision, s->detail, NULL);
    }
    return prc;
}

/* The commit's argument for the cached path: the entry's document with this send's invocation
 * ID and the decision's time spliced in (ids and times need no escaping in JSON). Malloc'd, or
 * NULL when memory ran out. */
static char *cached_arg(const send_state *s, const deliver_cached *e)
{
    static const char a[] = "{\"invocation_id\":\"", b[] = "\",\"cached\":{\"decided_at\":\"",
                      c[] = "\",", d[] = ",";
    size_t n = strlen(a) + strlen(s->invocation_id) + strlen(b) + strlen(s->decided_at) +
               strlen(c) + strlen(e->cached_rest) + strlen(d) + strlen(e->doc_rest) + 1;
    char *text = malloc(n);
    if (text != NULL)
        snprintf(text, n, "%s%s%s%s%s%s%s%s", a, s->invocation_id, b, s->decided_at, c,
                 e->cached_rest, d, e->doc_rest);
    return text;
}

/* 0. The cached path: a send repeated under another invocation ID is decided from the
 * immutable facts an earlier send of this worker was read and allowed with (deliver_cache.h),
 * at the database time this worker knows, and committed in one call whose "cached" member has
 * the commit compare those facts with the graph and read the rest (revocation, validity, run
 * state, budget, invocation, head) itself. No entry, no known time, a decision other than
 * ALLOW or a refused commit leave the send to the fresh read (s->done unset; s->fall_back when
 * the entry was tried). Returns STATUS_OK or STATUS_ENOMEM. */
static int send_cached(send_state *s, deliver_result *out)
{
    const gate_env *g = s->g;
    const deliver_cached *e =
        deliver_cache_find(store_graph(g->st), s->context_id, s->payload_id, s->recipient, s->tool);
    double now = 0;
    if (e == NULL || !store_db_time(g->st, s->decided_at, &now))
        return STATUS_OK;
    guard_delivery_request req = {
        .run_id = e->ctx.run_id,
        .payload_id = (char *)s->payload_id,
        .recipient = (char *)s->recipient,
        .recipient_clearance = e->clearance,
        .tool = (char *)s->tool,
        .grant = e->step->cap.grant,
        .summary = &e->sum,
    };
    guard_ancestry none = {0};
    int rc = evaluator_delivery_decide(&e->step->cap, &e->ctx, &req, &none, &e->chain, now,
                                       e->payload_hash, e->content_sha256, &out->decision);
    if (rc != 0 || out->decision.outcome != GUARD_ALLOW) {
        guard_decision_free(&out->decision); /* the fresh read decides and records it */
        s->fall_back = true;
        return STATUS_OK;
    }
    s->cached = e;
    s->run_id = e->ctx.run_id;
    s->evaluator = e->evaluator;
    s->head.exists = true; /* sealed on this process's last event of the run (evlog.h) */
    snprintf(s->head.now, sizeof s->head.now, "%s", s->decided_at);
    s->have_head = true;
    snprintf(s->fingerprint, sizeof s->fingerprint, "%s", e->fingerprint);
    s->detail = send_detail(s, e->step);
    s->arg_text = cached_arg(s, e);
    json_t *ref = json_pack("{s:s, s:f}", "facts", e->facts_sha, "now", now);
    rc = s->detail != NULL && s->arg_text != NULL && ref != NULL
             ? evlog_owned_event(&s->ev, "delivery_decided", &out->decision, e->evaluator,
                                 s->detail, ref)
             : STATUS_ENOMEM;
    json_decref(ref);
    if (rc == STATUS_OK)
        rc = send_commit(s, out);
    if (rc == STATUS_OK && !s->fall_back)
        s->done = true;
    return rc;
}

/* Forgets what the cached path built, and its entry when it was tried and answered nothing
 * (s->fall_back: its facts changed, or no longer allow), so the send is read afresh as if it
 * had not been tried. */
static void send_uncache(send_state *s, deliver_result *out)
{
    if (s->fall_back)
        deliver_cache_drop(store_graph(s->g->st), s->context_id, s->payload_id, s->recipient,
                           s->tool);
    guard_decision_free(&out->decision);
    evlog_owned_free(&s->ev);
    free(s->arg_text);
    s->arg_text = NULL;
    json_decref(s->detail);
    s->detail = NULL;
    s->cached = NULL;
    s->fall_back = false;
    memset(&s->head, 0, sizeof s->head);
    s->have_head = false;
}

/* The commit's argument of s (a fresh send decided from its summary) without its invocation
 * ID, and its "cached" member without decided_at, into e (doc_rest, cached_rest). Returns
 * STATUS_OK or STATUS_ENOMEM. */
static int keep_texts(const send_state *s, deliver_cached *e)
{
    const guard_summary *sum = &s->f.sum;
    const char *seal = json_string_value(json_object_get(s->f.summary, "summary_seal"));
    json_t *cached = json_pack(
        "{s:s, s:o*, s:s, s:i, s:i, s:s, s:o*, s:o*, s:s}", "context", s->context_id, "owners",
        strs_json(&s->f.ctx.owners), "kind", sum->now_kind, "conf", sum->now_conf, "integrity",
        sum->now_integrity, "title", sum->now_title, "resources", strs_json(&sum->now_resources),
        "producers", strs_json(&sum->now_producers), "seal", seal != NULL ? seal : "");
    json_t *doc = s->arg != NULL ? json_copy(s->arg) : NULL;
    char *ctext = cached != NULL ? evlog_json_text(cached) : NULL;
    char *dtext = NULL;
    if (doc != NULL && json_object_del(doc, "invocation_id") == 0)
        dtext = evlog_json_text(doc);
    json_decref(cached);
    json_decref(doc);
    int rc = ctext != NULL && dtext != NULL && ctext[0] == '{' && dtext[0] == '{' ? STATUS_OK
                                                                                  : STATUS_ENOMEM;
    if (rc == STATUS_OK) {
        e->cached_rest = strdup(ctext + 1);
        e->doc_rest = strdup(dtext + 1);
        if (e->cached_rest == NULL || e->doc_rest == NULL)
            rc = STATUS_ENOMEM;
    }
    free(ctext);
    free(dtext);
    return rc;
}

/* After a fresh send committed: keeps its immutable facts for the next send of the same
 * context, payload, recipient and tool (send_cached), when it was decided from the payload's
 * verified summary and by its facts record (a send an approval holds never commits here). The
 * facts move from s into the cache. */
static void send_keep(send_state *s)
{
    if (!s->committed || s->cached != NULL || !s->f.has_sum || s->req.summary == NULL ||
        s->facts == NULL || s->content == NULL || s->payload_hash == NULL || s->arg == NULL ||
        json_object_get(s->arg, "lineage") != NULL)
        return;
    deliver_cached e;
    memset(&e, 0, sizeof e);
    if (keep_texts(s, &e) != STATUS_OK || (e.content = strdup(s->content)) == NULL) {
        deliver_cached_free(&e);
        return;
    }
    e.wf = s->f.wf;
    e.step = s->f.step;
    snprintf(e.evaluator, sizeof e.evaluator, "%s", s->f.fingerprint);
    e.clearance = s->req.recipient_clearance;
    snprintf(e.payload_hash, sizeof e.payload_hash, "%s", s->payload_hash);
    snprintf(e.content_sha256, sizeof e.content_sha256, "%s", s->actual);
    snprintf(e.fingerprint, sizeof e.fingerprint, "%s", s->fingerprint);
    snprintf(e.facts_sha, sizeof e.facts_sha, "%s", s->facts_sha);
    e.facts = s->facts;
    s->facts = NULL;
    e.ctx = s->f.ctx;
    e.sum = s->f.sum;
    e.chain = s->f.gchain;
    memset(&s->f.ctx, 0, sizeof s->f.ctx);
    memset(&s->f.sum, 0, sizeof s->f.sum);
    memset(&s->f.gchain, 0, sizeof s->f.gchain);
    s->run_id = NULL;
    deliver_cache_put(store_graph(s->g->st), s->context_id, s->payload_id, s->recipient, s->tool,
                      &e);
}

int deliver_archived(const gate_env *g, const char *context_id, const char *payload_id,
                     const char *recipient, const char *tool, const char *invocation_id,
                     deliver_result *out)
{
    memset(out, 0, sizeof *out);
    if (!ids_invocation_ok(invocation_id) || !payload_id || !*payload_id || !recipient ||
        !*recipient || !tool || !*tool)
        return STATUS_EINVAL;
    send_state s;
    memset(&s, 0, sizeof s);
    s = (send_state){.g = g, .context_id = context_id, .invocation_id = invocation_id};
    if (archive_send_digest(context_id, payload_id, recipient, tool, s.digest) != STATUS_OK)
        s.digest[0] = '\0'; /* matches no archived send: a retry then is a conflict */
    return send_archived(&s, out);
}

int deliver_send(const gate_env *g, const char *context_id, const char *payload_id,
                 const char *recipient, const char *tool, const char *invocation_id,
                 deliver_result *out)
{
    memset(out, 0, sizeof *out);
    if (!ids_invocation_ok(invocation_id) || !payload_id || !*payload_id || !recipient ||
        !*recipient || !tool || !*tool)
        return STATUS_EINVAL;
    send_state s;
    memset(&s, 0, sizeof s);
    s.g = g;
    s.context_id = context_id;
    s.payload_id = payload_id;
    s.recipient = recipient;
    s.tool = tool;
    s.invocation_id = invocation_id;
    if (archive_send_digest(context_id, payload_id, recipient, tool, s.digest) != STATUS_OK)
        s.digest[0] = '\0'; /* matches no archived record: a retry then is a conflict */

    int rc = send_cached(&s, out);
    if (rc == STATUS_OK && !s.done) {
        send_uncache(&s, out);
        rc = send_lookup(&s, out);
    }
    if (rc == STATUS_OK && !s.done)
        rc = send_evaluate(&s, out);
    if (rc == STATUS_OK && !s.done)
        rc = send_hold(&s, out);
    if (rc == STATUS_OK && !s.done)
        rc = send_commit(&s, out);
    /* Whatever answered the send, an ALLOW stands on a delivery: committed or acknowledged. */
    INVARIANT(rc != STATUS_OK || out->decision.outcome != GUARD_ALLOW || out->delivery != NULL);
    if (rc == STATUS_OK)
        send_keep(&s);
    send_free(&s, out);
    return rc;
}
