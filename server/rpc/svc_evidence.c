/*
 * svc_evidence.c - the Evidence service: replay a recorded decision from its snapshot, hand out
 * a signed receipt, audit a run's event hash chain, show the public key receipts are signed with.
 *
 * All four only read the graph (a receipt that was not attached yet is attached, which adds
 * nothing that could not be derived again), so a viewer may call them. Receipts need the
 * integrity key: without one they fail closed with FAILED_PRECONDITION
 * "INTEGRITY_KEY_REQUIRED: ...".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evidence/audit.h"
#include "charter.pb-c.h"
#include "evidence/archive_lookup.h"
#include "evidence/archive_replay.h"
#include "evidence/evlog.h"
#include "evidence/integrity.h"
#include "evidence/receipt_issue.h"
#include "policy/evaluator.h"
#include "rpc/services.h"
#include "rpc/wire.h"

#define REQUIRE_ID(c, field, value)                                                                \
    do {                                                                                           \
        int require_id_rc = call_require_id(c, field, value);                                      \
        if (require_id_rc != RPC_OK)                                                               \
            return require_id_rc;                                                                  \
    } while (0)

static const char *evaluator_of(const json_t *event)
{
    const char *s = json_string_value(json_object_get(event, "evaluator"));
    return s != NULL ? s : "";
}

/* The event seq (decimal) of run_id from the database, its snapshot resolved: *event (caller
 * decrefs). Returns RPC_OK, or the failure recorded; *gone set (and nothing recorded) when
 * neither the event nor its run is in the database: the run may have been archived. */
static int replay_event_live(call *c, const char *run_id, const char *seq, json_t **event,
                             bool *gone)
{
    char event_name[192];
    snprintf(event_name, sizeof event_name, "event %s of run %.128s", seq, run_id);
    *event = NULL;
    *gone = false;
    int rc = q_get_event(c->st, run_id, seq, event);
    if (rc == STATUS_ENOTFOUND) {
        json_t *head = NULL;
        int hrc = q_run_head(c->st, run_id, &head);
        *gone = hrc == STATUS_ENOTFOUND ||
                (hrc == STATUS_OK && !json_is_true(json_object_get(head, "exists")));
        json_decref(head);
    }
    if (rc != STATUS_OK)
        return *gone ? RPC_NOT_FOUND : call_fail_status(c, rc, event_name);
    /* A large snapshot is stored once by content; replay decides from the facts themselves. */
    char *facts = NULL;
    char missing[224];
    rc = evlog_snapshot_resolve(c->st, json_string_value(json_object_get(*event, "snapshot")),
                                &facts, missing, sizeof missing);
    if (rc == STATUS_OK && json_object_set_new(*event, "snapshot", json_string(facts)) != 0)
        rc = STATUS_ENOMEM;
    free(facts);
    if (rc == STATUS_OK)
        return RPC_OK;
    json_decref(*event);
    *event = NULL;
    /* Facts that are gone or altered leave a snapshot replay cannot decode. */
    if (rc == STATUS_ENOTFOUND || rc == STATUS_EPROTO)
        return call_fail_statusf(c, STATUS_ESNAPSHOT, "event %s: the facts it names are %s: %s",
                                 seq, rc == STATUS_ENOTFOUND ? "missing" : "altered", missing);
    return call_fail_status(c, rc, event_name);
}

/* A replay's failure rc (evaluator_replay's codes) as the answer. */
static int replay_failed(call *c, int rc, const char *seq, const char *why)
{
    if (rc == STATUS_ENOMEM)
        return call_fail_statusf(c, rc, "out of memory");
    /* Beyond the event that is no decision or of another evaluator, whatever replay cannot use
     * comes from the recorded snapshot (evaluator.h). */
    if (rc != STATUS_ENOTDECISION && rc != STATUS_EFINGERPRINT)
        rc = STATUS_ESNAPSHOT;
    return call_fail_statusf(c, rc, "event %s: %s", seq, why);
}

/* A run the database no longer has: its decision seq replayed from the archive file charterd's
 * archive folder holds for it (found through the graph folder's index, never at a name the
 * database holds), as a live one is; archive (n bytes) names the file. Without the file the
 * run is not found, naming where it went when that is known. */
static int replay_archived(call *c, const char *run_id, uint64_t seq, archive_replay_result *out,
                           char *archive, size_t n)
{
    char path[1536], why[300];
    int rc = c->env->archive_dir == NULL
                 ? STATUS_ENOTFOUND
                 : archive_find_run(c->env->archive_dir, store_graph(c->st), run_id, path,
                                    sizeof path, archive, n, why, sizeof why);
    if (rc == STATUS_ENOTFOUND) {
        /* Where the run went when that is known, else the event asked for, by its name. */
        char where[768];
        if (archive_name_run(c->st, c->env->archive_dir, run_id, where, sizeof where) == STATUS_OK)
            return call_fail_run(c, rc, run_id);
        return call_fail(c, RPC_NOT_FOUND, "event %llu of run %.128s not found",
                         (unsigned long long)seq, run_id);
    }
    if (rc == STATUS_EPROTO || rc == STATUS_EDENIED)
        return call_fail(c, RPC_FAILED_PRECONDITION, "run %.128s left the database: %s", run_id,
                         why);
    if (rc != STATUS_OK)
        return call_fail_status_id(c, rc, "the archive of run", run_id);
    char seqtext[24];
    snprintf(seqtext, sizeof seqtext, "%llu", (unsigned long long)seq);
    rc = archive_replay(path, c->env->evaluator, seq, out, why, sizeof why);
    if (rc == STATUS_ENOTFOUND || rc == STATUS_EPROTO || rc == STATUS_EUNAVAILABLE)
        return call_fail(c, rc == STATUS_ENOTFOUND ? RPC_NOT_FOUND : RPC_FAILED_PRECONDITION,
                         "run %.128s, archived to %s: %s", run_id, archive,
                         why[0] ? why : "its archive cannot be read");
    if (rc != STATUS_OK)
        return replay_failed(c, rc, seqtext, why);
    /* The index line and the file are the run's: its events say so too. */
    const char *of = json_string_value(json_object_get(out->event, "run_id"));
    if (of != NULL && strcmp(of, run_id) != 0) {
        archive_replay_result_free(out);
        return call_fail(c, RPC_FAILED_PRECONDITION, "run %.128s: its archive %s holds run %.128s",
                         run_id, archive, of);
    }
    return RPC_OK;
}

/* The response for event (recorded) replayed as res; archive names the file it came from
 * ("" for a run in the database). */
static int replay_respond(call *c, const json_t *event, const evaluator_replay_result *res,
                          const char *archive, ProtobufCMessage **out)
{
    Charter__V1__ReplayDecisionResponse *resp = call_alloc(c, sizeof *resp);
    if (resp == NULL)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    charter__v1__replay_decision_response__init(resp);
    resp->recorded = wire_event_decision(c, event);
    resp->replayed = res->no_snapshot ? NULL : wire_decision(c, &res->replayed);
    resp->no_snapshot = res->no_snapshot;
    resp->matches = res->matches;
    resp->evaluator = call_strdup(c, evaluator_of(event));
    resp->evaluator_version = (uint32_t)res->version;
    resp->before_versions = res->before_versions;
    resp->archive = call_strdup(c, archive);
    if (resp->recorded == NULL || resp->evaluator == NULL || resp->archive == NULL ||
        (!resp->no_snapshot && resp->replayed == NULL))
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &resp->base;
    return RPC_OK;
}

/* A recorded decision decided again: from the database, or for a run that left it, from its
 * archive file. */
static int replay_decision(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__ReplayDecisionRequest *req = (const Charter__V1__ReplayDecisionRequest *)in;
    REQUIRE_ID(c, "run_id", req->run_id);
    /* Checked before the database is asked: the query library refuses a seq beyond its bound
     * itself, live run or archived, in words naming its function. */
    if (req->seq == 0 || req->seq > STORE_MAX_SEQ)
        return call_fail(c, RPC_INVALID_ARGUMENT, "seq: the decision event's seq, from 1 to %llu",
                         STORE_MAX_SEQ);
    char seq[24];
    snprintf(seq, sizeof seq, "%llu", (unsigned long long)req->seq);
    json_t *event = NULL;
    bool gone = false;
    int rc = replay_event_live(c, req->run_id, seq, &event, &gone);
    if (rc != RPC_OK && gone) {
        archive_replay_result a;
        char archive[768];
        if ((rc = replay_archived(c, req->run_id, req->seq, &a, archive, sizeof archive)) != RPC_OK)
            return rc;
        rc = replay_respond(c, a.event, &a.res, archive, out);
        archive_replay_result_free(&a);
        return rc;
    }
    if (rc != RPC_OK)
        return rc;
    evaluator_replay_result res;
    char why[224];
    rc = evaluator_replay(c->env->evaluator, event, &res, why, sizeof why);
    if (rc != STATUS_OK) {
        json_decref(event);
        return replay_failed(c, rc, seq, why);
    }
    rc = replay_respond(c, event, &res, "", out);
    evaluator_replay_result_free(&res);
    json_decref(event);
    return rc;
}

/* A copy of the list in the call's arena. */
static char **strs_copy(call *c, char *const *items, size_t n)
{
    char **out = call_alloc(c, (n ? n : 1) * sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        if ((out[i] = call_strdup(c, items[i])) == NULL)
            return NULL;
    return out;
}

/* The receipt JSON object as a Receipt message in the call's arena. */
static Charter__V1__Receipt *receipt_message(call *c, const json_t *j)
{
    Charter__V1__Receipt parsed;
    if (receipt_json_parse(j, &parsed) != STATUS_OK)
        return NULL;
    Charter__V1__Receipt *r = call_alloc(c, sizeof *r);
    if (r != NULL) {
        charter__v1__receipt__init(r);
        r->kind = call_strdup(c, parsed.kind);
        r->run_id = call_strdup(c, parsed.run_id);
        r->invocation_id = call_strdup(c, parsed.invocation_id);
        r->payload_hash = call_strdup(c, parsed.payload_hash);
        r->recipient = call_strdup(c, parsed.recipient);
        r->tool = call_strdup(c, parsed.tool);
        r->grant_chain = strs_copy(c, parsed.grant_chain, parsed.n_grant_chain);
        r->n_grant_chain = parsed.n_grant_chain;
        r->time = call_strdup(c, parsed.time);
        r->evaluator = call_strdup(c, parsed.evaluator);
        r->status = call_strdup(c, parsed.status);
        r->last_seq = parsed.last_seq;
        r->last_event_hash = call_strdup(c, parsed.last_event_hash);
        r->deliveries = strs_copy(c, parsed.deliveries, parsed.n_deliveries);
        r->n_deliveries = parsed.n_deliveries;
        r->lineage = strs_copy(c, parsed.lineage, parsed.n_lineage);
        r->n_lineage = parsed.n_lineage;
        r->mac = call_strdup(c, parsed.mac);
        r->signature = call_strdup(c, parsed.signature);
        r->key_id = call_strdup(c, parsed.key_id);
        r->signed_text = call_strdup(c, parsed.signed_text);
        r->chain_seq = parsed.chain_seq;
        r->budget = call_strdup(c, parsed.budget);
        r->counters = call_strdup(c, parsed.counters);
        r->prev_receipt_hash = call_strdup(c, parsed.prev_receipt_hash);
    }
    receipt_json_clear(&parsed);
    if (r == NULL || !r->kind || !r->run_id || !r->invocation_id || !r->payload_hash ||
        !r->recipient || !r->tool || !r->grant_chain || !r->time || !r->evaluator || !r->status ||
        !r->last_event_hash || !r->deliveries || !r->lineage || !r->mac || !r->signature ||
        !r->key_id || !r->signed_text || !r->prev_receipt_hash)
        return NULL;
    return r;
}

static int get_receipt(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__GetReceiptRequest *req = (const Charter__V1__GetReceiptRequest *)in;
    if (!evlog_keyed())
        return call_fail_statusf(
            c, STATUS_ENOKEY,
            "INTEGRITY_KEY_REQUIRED: receipts are signed with the integrity key, and this graph "
            "has none (restart charterd with --adopt-integrity-key to seal it from now on)");
    REQUIRE_ID(c, "run_id", req->run_id);
    bool for_run = req->invocation_id == NULL || *req->invocation_id == '\0';
    if (!for_run)
        if (!ids_invocation_ok(req->invocation_id))
            return call_fail(c, RPC_INVALID_ARGUMENT, "%s", IDS_INVOCATION_RULE);
    json_t *receipt = NULL;
    char status[32] = "";
    int rc = for_run
                 ? receipt_issue_run(c->st, req->run_id, &receipt, status)
                 : receipt_issue_for_invocation(c->st, req->run_id, req->invocation_id, &receipt);
    if (rc == STATUS_ENOTENDED)
        return call_fail_statusf(
            c, rc,
            "run %s is %s: its receipt is issued once it is completed, blocked, in "
            "error, cancelled or budget_exhausted",
            req->run_id, *status ? status : "still moving");
    if (rc == STATUS_ENOKEY)
        return call_fail_statusf(
            c, rc, "INTEGRITY_KEY_REQUIRED: receipts are signed with the integrity key");
    if (rc != STATUS_OK)
        return for_run ? call_fail_run(c, rc, req->run_id) : call_fail_status(c, rc, "delivery");
    Charter__V1__Receipt *r = receipt_message(c, receipt);
    json_decref(receipt);
    if (r == NULL)
        return call_fail(c, RPC_INTERNAL, "the stored receipt cannot be read");
    *out = &r->base;
    return RPC_OK;
}

static int audit_run(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__AuditRunRequest *req = (const Charter__V1__AuditRunRequest *)in;
    REQUIRE_ID(c, "run_id", req->run_id);
    audit_result a;
    int rc = audit_chain(c->st, req->run_id, &a);
    if (rc != STATUS_OK)
        return call_fail_run(c, rc, req->run_id);
    Charter__V1__AuditRunResponse *resp = call_alloc(c, sizeof *resp);
    if (resp == NULL)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    charter__v1__audit_run_response__init(resp);
    resp->intact = a.intact;
    resp->events = a.events;
    resp->first_bad_seq = a.first_bad_seq;
    resp->keyed = a.keyed;
    resp->keyless_until = a.keyless_until;
    if ((resp->problem = call_strdup(c, a.problem)) == NULL)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &resp->base;
    return RPC_OK;
}

/* The public half of the receipt signing key: nothing secret, so a viewer may ask for it. */
static int get_receipt_key(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    (void)in;
    if (!integrity_signing())
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "SIGNING_KEY_REQUIRED: this charterd signs no receipts (start it with "
                         "--signing-key FILE, an Ed25519 private key)");
    Charter__V1__ReceiptKey *k = call_alloc(c, sizeof *k);
    if (k == NULL)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    charter__v1__receipt_key__init(k);
    k->algorithm = (char *)"ed25519";
    k->public_key_pem = call_strdup(c, integrity_public_pem());
    k->key_id = call_strdup(c, integrity_key_id());
    if (k->public_key_pem == NULL || k->key_id == NULL)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &k->base;
    return RPC_OK;
}

/* The Evidence service: one row per method, checked against the generated descriptor at
 * startup (dispatch_check_tables); dispatch enforces each row's columns (services.h). */
const svc_method svc_evidence_methods[] = {
    {"ReplayDecision", &charter__v1__replay_decision_request__descriptor,
     &charter__v1__replay_decision_response__descriptor, ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, replay_decision},
    {"GetReceipt", &charter__v1__get_receipt_request__descriptor, &charter__v1__receipt__descriptor,
     ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE, SVC_SCRIPTED_SERVED, get_receipt},
    {"AuditRun", &charter__v1__audit_run_request__descriptor,
     &charter__v1__audit_run_response__descriptor, ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, audit_run},
    {"WhatIf", &charter__v1__what_if_request__descriptor,
     &charter__v1__what_if_response__descriptor, ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, svc_whatif_handler},
    {"GetReceiptKey", &charter__v1__get_receipt_key_request__descriptor,
     &charter__v1__receipt_key__descriptor, ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, get_receipt_key},
};
const size_t svc_evidence_methods_len =
    sizeof svc_evidence_methods / sizeof svc_evidence_methods[0];
