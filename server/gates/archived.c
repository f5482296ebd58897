/*
 * archived.c - a retry through an archived run's context, answered from its archive
 * (archived.h). The archive is read (evidence/archive_lookup.c); the rule that compares the
 * retry with what the run committed lives here, as it does for a live delivery in deliver.c.
 */
#include "gates/archived.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/invariant.h"
#include "core/status.h"
#include "evidence/archive_lookup.h"

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* True when req is the very request the archived run committed: for a send the same digest
 * (over context, payload, recipient and tool: archive_send_digest); for a tool call the same
 * context, tool and arguments, and no payload. */
static bool same_request(const archived_request *req, const archive_invocation *a)
{
    const json_t *d = a->delivery;
    if (req->digest != NULL)
        return req->digest[0] != '\0' && strcmp(req->digest, a->digest) == 0;
    return req->content != NULL && req->tool != NULL && strcmp(a->context, req->context_id) == 0 &&
           strcmp(str(d, "tool"), req->tool) == 0 && strcmp(str(d, "content"), req->content) == 0 &&
           str(d, "payload_id")[0] == '\0';
}

/* The archived delivery (its hash as stored) as charter_find_delivery shapes a delivery: the
 * grant chain as a list, the seq as a number; with "archived" and "archive" (the file under
 * the archive folder). New reference, or NULL when memory ran out. */
static json_t *delivery_of(const json_t *stored, const char *archive)
{
    json_t *d = json_deep_copy(stored);
    if (d == NULL)
        return NULL;
    const char *chain = json_string_value(json_object_get(d, "grant_chain"));
    json_t *list = chain != NULL ? json_loads(chain, 0, NULL) : NULL;
    if (chain != NULL && !json_is_array(list)) {
        json_decref(list);
        list = json_array();
    }
    json_t *seq = json_object_get(d, "event_seq");
    json_int_t n = json_is_string(seq) ? strtoll(json_string_value(seq), NULL, 10) : 0;
    if ((list != NULL && json_object_set_new(d, "grant_chain", list) != 0) ||
        (json_is_string(seq) && json_object_set_new(d, "event_seq", json_integer(n)) != 0) ||
        json_object_set_new(d, "archived", json_true()) != 0 ||
        json_object_set_new(d, "archive", json_string(archive)) != 0) {
        json_decref(d);
        return NULL;
    }
    return d;
}

/* d from what the archive holds of req (a->delivery set): ALLOW with *delivery when it is the
 * very request, DENY DELIVERY_CONFLICT otherwise. */
static int decide(const archived_request *req, const archive_invocation *a, const char *archive,
                  guard_decision *d, json_t **delivery)
{
    char w[1400];
    if (same_request(req, a)) {
        if ((*delivery = delivery_of(a->delivery, archive)) == NULL)
            return STATUS_ENOMEM;
        d->outcome = GUARD_ALLOW;
        snprintf(w, sizeof w,
                 "invocation %s was delivered by run %s, archived to %s: acknowledged from the "
                 "archive, nothing is delivered again",
                 req->invocation_id, a->run_id, archive);
    } else {
        d->outcome = GUARD_DENY;
        d->codes = 1u << GUARD_DELIVERY_CONFLICT;
        snprintf(w, sizeof w,
                 "invocation %s was committed with other content by run %s (archived to %s)",
                 req->invocation_id, a->run_id, archive);
    }
    d->witness = strdup(w);
    return d->witness != NULL ? STATUS_OK : STATUS_ENOMEM;
}

/* The archive of the run req names, else of the run that had its context. */
static int find(const char *graph_dir, const archived_request *req, archive_invocation *a,
                char *why, size_t n)
{
    int rc = STATUS_ENOTFOUND;
    if (req->run_id != NULL && req->run_id[0] != '\0')
        rc = archive_find_invocation(graph_dir, req->context_id, req->run_id, req->invocation_id, a,
                                     why, n);
    if (rc == STATUS_ENOTFOUND) {
        archive_invocation_free(a);
        rc = archive_find_invocation(graph_dir, req->context_id, NULL, req->invocation_id, a, why,
                                     n);
    }
    return rc;
}

int archived_answer(const gate_env *g, const archived_request *req, guard_decision *d,
                    json_t **delivery, json_t **owners, char *why, size_t n)
{
    memset(d, 0, sizeof *d);
    *delivery = NULL;
    if (owners != NULL)
        *owners = NULL;
    const char *graph = store_graph(g->st);
    char graph_dir[1200], archive[800], problem[512] = "";
    snprintf(graph_dir, sizeof graph_dir, "%s/%s", g->archive_dir, graph);
    archive_invocation a;
    memset(&a, 0, sizeof a);
    int rc = find(graph_dir, req, &a, problem, sizeof problem);
    snprintf(archive, sizeof archive, "%s/%s", graph, a.file);
    if (rc == STATUS_ENOTFOUND) {
        snprintf(why, n, "context %s not found (nor in any archived run of graph %s)",
                 req->context_id, graph);
    } else if (rc == STATUS_EPROTO) {
        snprintf(why, n,
                 "the archive of run %s, which had context %s, cannot answer for invocation %s: "
                 "%s",
                 a.run_id, req->context_id, req->invocation_id, problem);
        rc = guard_decision_unknown(d, why) == 0 ? STATUS_OK : STATUS_ENOMEM;
    } else if (rc == STATUS_OK && a.delivery == NULL) {
        snprintf(why, n,
                 "context %s not found: its run %s was archived to %s, which holds no commit of "
                 "invocation %s (nothing is delivered through an archived run's context)",
                 req->context_id, a.run_id, archive, req->invocation_id);
        rc = STATUS_ENOTFOUND;
    } else if (rc == STATUS_OK) {
        rc = decide(req, &a, archive, d, delivery);
    }
    /* An acknowledgement stands on the delivery the archive holds, never on nothing. */
    INVARIANT(rc != STATUS_OK || d->outcome != GUARD_ALLOW || *delivery != NULL);
    if (rc == STATUS_OK && owners != NULL && a.has_context) {
        *owners = a.owners;
        a.owners = NULL;
    }
    archive_invocation_free(&a);
    return rc;
}
