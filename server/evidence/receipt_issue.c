/*
 * receipt_issue.c - building, signing, attaching and reading back receipts (see
 * receipt_issue.h). The canonical texts come from proto/receipt.c, the very code the offline
 * verifier runs; the MAC and the signature are taken by integrity.c, which alone holds the keys.
 */
#include "evidence/receipt_issue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "evidence/evlog.h"
#include "evidence/integrity.h"
#include "receipt.h"
#include "policy/evaluator.h"

static json_t *strs_json(char *const *items, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < n; i++) {
        if (json_array_append_new(a, json_string(items[i] != NULL ? items[i] : "")) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

#define RI_S(x) ((x) != NULL ? (x) : "")

json_t *receipt_issue_json(const Charter__V1__Receipt *r)
{
    json_t *chain = strs_json(r->grant_chain, r->n_grant_chain);
    json_t *deliveries = strs_json(r->deliveries, r->n_deliveries);
    if (chain == NULL || deliveries == NULL) {
        json_decref(chain);
        json_decref(deliveries);
        return NULL;
    }
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:s, s:s, s:I, s:s, s:o, s:s}",
                          "kind", RI_S(r->kind), "run_id", RI_S(r->run_id), "invocation_id",
                          RI_S(r->invocation_id), "payload_hash", RI_S(r->payload_hash),
                          "recipient", RI_S(r->recipient), "tool", RI_S(r->tool), "grant_chain",
                          chain, "time", RI_S(r->time), "evaluator", RI_S(r->evaluator), "status",
                          RI_S(r->status), "last_seq", (json_int_t)r->last_seq, "last_event_hash",
                          RI_S(r->last_event_hash), "deliveries", deliveries, "mac", RI_S(r->mac));
    /* The signature's fields, present only on a signed receipt. */
    if (j != NULL && r->signature != NULL && *r->signature != '\0') {
        json_t *sig =
            json_pack("{s:s, s:s, s:s, s:I, s:s}", "signature", r->signature, "key_id",
                      RI_S(r->key_id), "signed_text", RI_S(r->signed_text), "chain_seq",
                      (json_int_t)r->chain_seq, "prev_receipt_hash", RI_S(r->prev_receipt_hash));
        if (sig == NULL || json_object_update(j, sig) != 0) {
            json_decref(j);
            j = NULL;
        }
        json_decref(sig);
    }
    /* An invoke receipt's lineage; absent from the other kinds. */
    if (j != NULL && r->kind != NULL && strcmp(r->kind, "invoke") == 0 &&
        json_object_set_new(j, "lineage", strs_json(r->lineage, r->n_lineage)) != 0) {
        json_decref(j);
        j = NULL;
    }
    /* A charter-receipt-2 run receipt's budget and counters; absent from older receipts. */
    if (j != NULL && ((r->budget != NULL && *r->budget != '\0') ||
                      (r->counters != NULL && *r->counters != '\0'))) {
        if (json_object_set_new(j, "budget", json_string(RI_S(r->budget))) != 0 ||
            json_object_set_new(j, "counters", json_string(RI_S(r->counters))) != 0) {
            json_decref(j);
            j = NULL;
        }
    }
    return j;
}

void receipt_issue_clear(Charter__V1__Receipt *r)
{
    free(r->grant_chain);
    free(r->deliveries);
    free(r->lineage);
    charter__v1__receipt__init(r);
}

/* A string field: absent or null reads as "", another type is malformed. */
static int parse_text(const json_t *j, const char *k, char **out)
{
    static char empty[] = "";
    const json_t *v = json_object_get(j, k);
    *out = empty;
    if (v == NULL || json_is_null(v))
        return STATUS_OK;
    if (!json_is_string(v))
        return STATUS_EPROTO;
    *out = (char *)json_string_value(v);
    return STATUS_OK;
}

static int parse_list(const json_t *j, const char *k, char ***out, size_t *n)
{
    const json_t *v = json_object_get(j, k);
    *out = NULL;
    *n = 0;
    if (v == NULL || json_is_null(v) || (json_is_object(v) && json_object_size(v) == 0))
        return STATUS_OK;
    if (!json_is_array(v))
        return STATUS_EPROTO;
    size_t count = json_array_size(v);
    if (count == 0)
        return STATUS_OK;
    char **items = calloc(count, sizeof *items);
    if (items == NULL)
        return STATUS_ENOMEM;
    for (size_t i = 0; i < count; i++) {
        const char *s = json_string_value(json_array_get(v, i));
        if (s == NULL) {
            free(items);
            return STATUS_EPROTO;
        }
        items[i] = (char *)s;
    }
    *out = items;
    *n = count;
    return STATUS_OK;
}

int receipt_issue_parse(const json_t *j, Charter__V1__Receipt *r)
{
    charter__v1__receipt__init(r);
    if (!json_is_object(j))
        return STATUS_EPROTO;
    int rc = parse_text(j, "kind", &r->kind);
    if (rc == STATUS_OK)
        rc = parse_text(j, "run_id", &r->run_id);
    if (rc == STATUS_OK)
        rc = parse_text(j, "invocation_id", &r->invocation_id);
    if (rc == STATUS_OK)
        rc = parse_text(j, "payload_hash", &r->payload_hash);
    if (rc == STATUS_OK)
        rc = parse_text(j, "recipient", &r->recipient);
    if (rc == STATUS_OK)
        rc = parse_text(j, "tool", &r->tool);
    if (rc == STATUS_OK)
        rc = parse_text(j, "time", &r->time);
    if (rc == STATUS_OK)
        rc = parse_text(j, "evaluator", &r->evaluator);
    if (rc == STATUS_OK)
        rc = parse_text(j, "status", &r->status);
    if (rc == STATUS_OK)
        rc = parse_text(j, "last_event_hash", &r->last_event_hash);
    if (rc == STATUS_OK)
        rc = parse_text(j, "mac", &r->mac);
    if (rc == STATUS_OK)
        rc = parse_text(j, "signature", &r->signature);
    if (rc == STATUS_OK)
        rc = parse_text(j, "key_id", &r->key_id);
    if (rc == STATUS_OK)
        rc = parse_text(j, "signed_text", &r->signed_text);
    if (rc == STATUS_OK)
        rc = parse_text(j, "prev_receipt_hash", &r->prev_receipt_hash);
    if (rc == STATUS_OK)
        rc = parse_text(j, "budget", &r->budget);
    if (rc == STATUS_OK)
        rc = parse_text(j, "counters", &r->counters);
    const json_t *cseq = json_object_get(j, "chain_seq");
    if (rc == STATUS_OK && json_is_integer(cseq) && json_integer_value(cseq) >= 0)
        r->chain_seq = (uint64_t)json_integer_value(cseq);
    else if (rc == STATUS_OK && cseq != NULL && !json_is_null(cseq))
        rc = STATUS_EPROTO;
    const json_t *seq = json_object_get(j, "last_seq");
    if (rc == STATUS_OK && json_is_integer(seq) && json_integer_value(seq) >= 0) {
        r->last_seq = (uint64_t)json_integer_value(seq);
    } else if (rc == STATUS_OK && json_is_string(seq)) {
        char *end = NULL;
        const char *s = json_string_value(seq);
        r->last_seq = strtoull(s, &end, 10);
        if (*s < '0' || *s > '9' || end == NULL || *end != '\0')
            rc = STATUS_EPROTO;
    } else if (rc == STATUS_OK && seq != NULL && !json_is_null(seq)) {
        rc = STATUS_EPROTO;
    }
    if (rc == STATUS_OK)
        rc = parse_list(j, "grant_chain", &r->grant_chain, &r->n_grant_chain);
    if (rc == STATUS_OK)
        rc = parse_list(j, "deliveries", &r->deliveries, &r->n_deliveries);
    if (rc == STATUS_OK)
        rc = parse_list(j, "lineage", &r->lineage, &r->n_lineage);
    if (rc != STATUS_OK)
        receipt_issue_clear(r);
    return rc;
}

/* A signed receipt is re-signed this many times when other receipts of its run keep taking the
 * chain's next place first; then it is attached on a later call (Evidence/GetReceipt). */
#define RECEIPT_CHAIN_ATTEMPTS 16

/* The chain place a signed receipt is signed for, and what it signs. */
typedef struct {
    char prev[65];
    uint64_t seq;
    char signature[89];
    char hash[65];
    char *text;
} receipt_signing;

/* Signs r for the chain place in s (r's signature fields set, pointing into s). */
static int sign_for_place(Charter__V1__Receipt *r, receipt_signing *s)
{
    char err[160];
    size_t len = 0;
    free(s->text);
    s->text = NULL;
    r->key_id = (char *)integrity_key_id();
    r->chain_seq = s->seq;
    r->prev_receipt_hash = s->prev;
    r->signature = NULL;
    r->signed_text = NULL;
    int rc = charter_receipt_signed_text(r, &s->text, &len, err, sizeof err);
    if (rc != 0)
        return rc == -CHARTER_RESOURCE_EXHAUSTED ? STATUS_ENOMEM : STATUS_EPROTO;
    if ((rc = integrity_sign(s->text, len, s->signature)) != STATUS_OK)
        return rc;
    if (digest_sha256_hex(s->text, len, s->hash) != 0)
        return STATUS_EPROTO;
    r->signature = s->signature;
    r->signed_text = s->text;
    return STATUS_OK;
}

/* One charter_attach_receipt call for r ({run_id, invocation_id or last_seq, receipt, chain
 * when signed}). *reply is the function's reply, caller decrefs. */
static int attach_once(store *st, const Charter__V1__Receipt *r, bool for_run,
                       const receipt_signing *s, json_t **reply)
{
    json_t *rj = receipt_issue_json(r);
    char *rtext = rj != NULL ? json_dumps(rj, JSON_COMPACT) : NULL;
    json_decref(rj);
    json_t *arg =
        rtext != NULL ? json_pack("{s:s, s:s}", "run_id", r->run_id, "receipt", rtext) : NULL;
    free(rtext);
    if (arg == NULL)
        return STATUS_ENOMEM;
    int rc;
    if (for_run)
        rc = json_object_set_new(arg, "last_seq", json_integer((json_int_t)r->last_seq));
    else
        rc = json_object_set_new(arg, "invocation_id", json_string(r->invocation_id));
    if (rc == 0 && s != NULL)
        rc = json_object_set_new(arg, "chain",
                                 json_pack("{s:s, s:s, s:I}", "prev", s->prev, "hash", s->hash,
                                           "seq", (json_int_t)s->seq));
    rc = rc == 0 ? q_attach_receipt(st, arg, reply) : STATUS_ENOMEM;
    json_decref(arg);
    return rc;
}

/* MACs r (r->mac set to mac) and, with a signing key, signs it for the next place of its run's
 * receipt chain; attaches its JSON with charter_attach_receipt and answers with the receipt
 * stored afterwards (ours, or one attached first by another caller); NULL in *stored when the
 * function reports none. A signed receipt whose chain place was taken meanwhile is signed again
 * for the place the function reports. */
static int sign_and_attach(store *st, Charter__V1__Receipt *r, char mac[65], bool for_run,
                           json_t **stored)
{
    char err[160];
    *stored = NULL;
    if (!evlog_keyed())
        return STATUS_ENOKEY;
    char *text = NULL;
    size_t len = 0;
    int rc = charter_receipt_text(r, &text, &len, err, sizeof err);
    if (rc != 0)
        return rc == -CHARTER_RESOURCE_EXHAUSTED ? STATUS_ENOMEM : STATUS_EPROTO;
    rc = integrity_mac(text, len, mac);
    free(text);
    if (rc != STATUS_OK)
        return STATUS_EPROTO;
    r->mac = mac;
    bool signing = integrity_signing();
    receipt_signing s = {.prev = "", .seq = 1, .text = NULL};
    json_t *reply = NULL;
    bool placed = false;
    for (int attempt = 0; rc == STATUS_OK && !placed && attempt < RECEIPT_CHAIN_ATTEMPTS;
         attempt++) {
        if (signing && (rc = sign_for_place(r, &s)) != STATUS_OK)
            break;
        json_decref(reply);
        reply = NULL;
        if ((rc = attach_once(st, r, for_run, signing ? &s : NULL, &reply)) != STATUS_OK)
            break;
        if (!json_is_true(json_object_get(reply, "conflict"))) {
            placed = true;
            break;
        }
        /* The chain moved on since the first guess or another receipt took the place. */
        const char *head = json_string_value(json_object_get(reply, "chain_head"));
        json_t *n = json_object_get(reply, "chain_seq");
        if (head == NULL || (*head != '\0' && strlen(head) != 64) || !json_is_integer(n) ||
            json_integer_value(n) < 0) {
            rc = STATUS_EPROTO;
            break;
        }
        snprintf(s.prev, sizeof s.prev, "%s", head);
        s.seq = (uint64_t)json_integer_value(n) + 1;
    }
    if (rc == STATUS_OK && !placed)
        rc = STATUS_EUNAVAILABLE; /* the chain kept moving: issued again on a later call */
    const char *now = rc == STATUS_OK ? json_string_value(json_object_get(reply, "receipt")) : NULL;
    if (now != NULL) {
        *stored = json_loads(now, 0, NULL);
        if (!json_is_object(*stored)) {
            json_decref(*stored);
            *stored = NULL;
            rc = STATUS_EPROTO;
        }
    }
    json_decref(reply);
    free(s.text);
    r->signature = r->signed_text = r->key_id = r->prev_receipt_hash = NULL;
    return rc;
}

/* The stored receipt text of an object (delivery or run), parsed; NULL when none. */
static json_t *attached_receipt(const json_t *obj)
{
    const char *text = json_string_value(json_object_get(obj, "receipt"));
    if (text == NULL)
        return NULL;
    json_t *j = json_loads(text, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

int receipt_issue_delivery(store *st, const json_t *delivery, json_t **receipt)
{
    *receipt = NULL;
    if (!evlog_keyed())
        return STATUS_ENOKEY;
    if ((*receipt = attached_receipt(delivery)) != NULL)
        return STATUS_OK;
    Charter__V1__Receipt r = CHARTER__V1__RECEIPT__INIT;
    char *chain[64];
    const json_t *jchain = json_object_get(delivery, "grant_chain");
    size_t i;
    const json_t *v;
    json_array_foreach(jchain, i, v)
    {
        if (r.n_grant_chain == sizeof chain / sizeof chain[0] || !json_is_string(v))
            return STATUS_EPROTO;
        chain[r.n_grant_chain++] = (char *)json_string_value(v);
    }
    /* An invocation's effect names the artifacts its values came from (the delivery's
     * lineage, written by its commit): an invoke receipt. */
    const json_t *jlineage = json_object_get(delivery, "lineage");
    /* (the database's JSON writes an empty list as {}) */
    bool invoke =
        json_is_array(jlineage) || (json_is_object(jlineage) && json_object_size(jlineage) == 0);
    r.kind = invoke ? "invoke" : "delivery";
    if (json_array_size(jlineage) > 0 &&
        (r.lineage = calloc(json_array_size(jlineage), sizeof *r.lineage)) == NULL)
        return STATUS_ENOMEM;
    json_array_foreach(jlineage, i, v)
    {
        if (!json_is_string(v)) {
            free(r.lineage);
            return STATUS_EPROTO;
        }
        r.lineage[r.n_lineage++] = (char *)json_string_value(v);
    }
    r.run_id = (char *)json_string_value(json_object_get(delivery, "run_id"));
    r.invocation_id = (char *)json_string_value(json_object_get(delivery, "invocation_id"));
    r.payload_hash = (char *)json_string_value(json_object_get(delivery, "payload_hash"));
    r.recipient = (char *)json_string_value(json_object_get(delivery, "recipient"));
    r.tool = (char *)json_string_value(json_object_get(delivery, "tool"));
    r.grant_chain = chain;
    r.time = (char *)json_string_value(json_object_get(delivery, "committed_at"));
    r.evaluator = (char *)json_string_value(json_object_get(delivery, "evaluator"));
    if (r.run_id == NULL || r.invocation_id == NULL || r.payload_hash == NULL ||
        r.recipient == NULL || r.tool == NULL || r.time == NULL || r.n_grant_chain == 0) {
        free(r.lineage);
        return STATUS_EPROTO;
    }
    if (r.evaluator == NULL)
        r.evaluator = "";
    char mac[65];
    int rc = sign_and_attach(st, &r, mac, false, receipt);
    free(r.lineage);
    return rc;
}

int receipt_issue_for_invocation(store *st, const char *run_id, const char *invocation_id,
                                 json_t **receipt)
{
    *receipt = NULL;
    if (!evlog_keyed())
        return STATUS_ENOKEY;
    json_t *reply = NULL;
    int rc = q_get_receipt(st, run_id, invocation_id, &reply);
    if (rc == STATUS_OK) {
        const json_t *d = json_object_get(reply, "delivery");
        rc = json_is_object(d) ? receipt_issue_delivery(st, d, receipt) : STATUS_EPROTO;
    }
    json_decref(reply);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One attempt at the run's receipt. *again is set when the run moved on while it was built. */
/* The run's budgets (those set) and counters as the receipt's "name=value,..." texts; both
 * empty for a run no executor ran (external: no budget, every counter 0). */
static void run_budget_text(const json_t *run, char *budget, size_t nb, char *counters, size_t nc)
{
    static const char *const budgets[] = {"max_wall_clock_ms", "max_model_calls", "max_steps",
                                          "max_deliveries"};
    static const char *const counted[] = {"wall_clock_ms", "model_calls", "steps", "deliveries"};
    size_t ub = 0, uc = 0;
    bool any = false;
    budget[0] = counters[0] = '\0';
    for (size_t i = 0; i < 4; i++) {
        json_int_t b = json_integer_value(json_object_get(run, budgets[i]));
        json_int_t k = json_integer_value(json_object_get(run, counted[i]));
        any = any || b > 0 || k > 0;
        if (b > 0 && ub < nb)
            ub += (size_t)snprintf(budget + ub, nb - ub, "%s%s=%lld", ub ? "," : "", budgets[i],
                                   (long long)b);
        if (uc < nc)
            uc += (size_t)snprintf(counters + uc, nc - uc, "%s%s=%lld", uc ? "," : "", counted[i],
                                   (long long)k);
    }
    if (!any)
        counters[0] = '\0';
}

static int run_receipt_once(store *st, const char *run_id, json_t **receipt, char status[32],
                            bool *again)
{
    json_t *reply = NULL;
    *again = false;
    int rc = q_get_receipt(st, run_id, "", &reply);
    if (rc != STATUS_OK)
        return rc;
    const json_t *run = json_object_get(reply, "run");
    const json_t *seqj = json_object_get(run, "seq");
    const char *st_now = json_string_value(json_object_get(run, "status"));
    const char *head = json_string_value(json_object_get(run, "head"));
    const char *last_ts = json_string_value(json_object_get(reply, "last_ts"));
    if (!json_is_integer(seqj) || st_now == NULL || head == NULL || last_ts == NULL) {
        json_decref(reply);
        return STATUS_EPROTO;
    }
    uint64_t seq = (uint64_t)json_integer_value(seqj);
    if (status != NULL)
        snprintf(status, 32, "%s", st_now);
    json_t *have = attached_receipt(run);
    json_t *have_seq = json_object_get(have, "last_seq");
    if (have != NULL && json_is_integer(have_seq) &&
        (uint64_t)json_integer_value(have_seq) == seq) {
        *receipt = have;
        json_decref(reply);
        return STATUS_OK;
    }
    json_decref(have);
    /* The statuses a run rests in (interrupted, queued, running and recovering still move). */
    if (strcmp(st_now, "completed") != 0 && strcmp(st_now, "blocked") != 0 &&
        strcmp(st_now, "error") != 0 && strcmp(st_now, "cancelled") != 0 &&
        strcmp(st_now, "budget_exhausted") != 0) {
        json_decref(reply);
        return STATUS_ENOTENDED;
    }
    Charter__V1__Receipt r = CHARTER__V1__RECEIPT__INIT;
    const json_t *dl = json_object_get(reply, "deliveries");
    rc = STATUS_OK;
    if (json_is_array(dl) && json_array_size(dl) > 0) {
        r.n_deliveries = json_array_size(dl);
        if ((r.deliveries = calloc(r.n_deliveries, sizeof *r.deliveries)) == NULL)
            rc = STATUS_ENOMEM;
        for (size_t i = 0; rc == STATUS_OK && i < r.n_deliveries; i++) {
            r.deliveries[i] = (char *)json_string_value(json_array_get(dl, i));
            if (r.deliveries[i] == NULL)
                rc = STATUS_EPROTO;
        }
        if (rc == STATUS_OK)
            qsort(r.deliveries, r.n_deliveries, sizeof *r.deliveries, cmp_str);
    }
    r.kind = "run";
    r.run_id = (char *)run_id;
    r.status = (char *)st_now;
    r.last_seq = seq;
    r.last_event_hash = (char *)head;
    r.time = (char *)last_ts;
    /* The evaluator of the run's workflow (the run pins its full version). */
    char evaluator[65];
    const char *version = json_string_value(json_object_get(run, "workflow"));
    if (version == NULL || evaluator_fingerprint_of(version, evaluator) != 0 ||
        strlen(version) != 64)
        snprintf(evaluator, sizeof evaluator, "%s", evlog_evaluator());
    r.evaluator = evaluator;
    /* What the run was allowed and what it used: the budgets it carried, the counters its
     * executor kept (an external run has neither: a format 1 receipt). */
    char budget[256], counters[256];
    run_budget_text(run, budget, sizeof budget, counters, sizeof counters);
    r.budget = budget;
    r.counters = counters;
    char mac[65];
    json_t *stored = NULL;
    if (rc == STATUS_OK)
        rc = sign_and_attach(st, &r, mac, true, &stored);
    free(r.deliveries);
    json_decref(reply);
    if (rc != STATUS_OK)
        return rc;
    json_t *stored_seq = json_object_get(stored, "last_seq");
    if (stored == NULL || !json_is_integer(stored_seq) ||
        (uint64_t)json_integer_value(stored_seq) != seq) {
        json_decref(stored);
        *again = true;
        return STATUS_OK;
    }
    *receipt = stored;
    return STATUS_OK;
}

int receipt_issue_run(store *st, const char *run_id, json_t **receipt, char status[32])
{
    *receipt = NULL;
    if (status != NULL)
        status[0] = '\0';
    if (!evlog_keyed())
        return STATUS_ENOKEY;
    for (int attempt = 0; attempt < 3; attempt++) {
        bool again = false;
        int rc = run_receipt_once(st, run_id, receipt, status, &again);
        if (rc != STATUS_OK || !again)
            return rc;
    }
    return STATUS_ENOTENDED; /* it keeps moving: not ended for long enough to sign */
}
