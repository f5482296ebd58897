/*
 * cli_print.c - human-readable output of the `charter` CLI.
 *
 * Decisions come first and read as one line each, the way an operator scans a run: what was
 * attempted, toward whom, the verdict, and for a refusal the codes and the witness path.
 */
#include "cli_print.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_TREE_DEPTH 256

const char *cli_outcome_word(int outcome)
{
    switch (outcome) {
    case CHARTER__V1__OUTCOME__ALLOW:
        return "allow";
    case CHARTER__V1__OUTCOME__DENY:
        return "deny";
    case CHARTER__V1__OUTCOME__UNKNOWN:
        return "unknown";
    default:
        return "-";
    }
}

static const char *conf_word(int conf)
{
    switch (conf) {
    case 0:
        return "public";
    case 1:
        return "internal";
    case 2:
        return "confidential";
    default:
        return "conf?";
    }
}

static const char *integrity_word(int integrity)
{
    switch (integrity) {
    case 0:
        return "untrusted";
    case 1:
        return "trusted";
    default:
        return "integrity?";
    }
}

static const char *text(const char *s)
{
    return s != NULL && s[0] != '\0' ? s : "-";
}

void cli_format_time(double ts, char *buf, size_t size)
{
    struct tm tm;
    time_t t = (time_t)ts;
    if (ts <= 0 || gmtime_r(&t, &tm) == NULL || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, size, "-");
}

/* Prints items joined by sep, or "-" when there are none. */
static void print_list(FILE *out, char *const *items, size_t n, const char *sep)
{
    if (n == 0) {
        fputs("-", out);
        return;
    }
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%s%s", i > 0 ? sep : "", items[i]);
}

/* Codes (comma-joined) and witness after a verdict, each preceded by two spaces. */
static void print_codes_witness(FILE *out, char *const *codes, size_t n_codes, const char *witness)
{
    if (n_codes > 0) {
        fputs("  ", out);
        print_list(out, codes, n_codes, ",");
    }
    if (witness != NULL && witness[0] != '\0')
        fprintf(out, "  %s", witness);
}

void cli_print_decision(FILE *out, const char *action, const char *target,
                        const Charter__V1__Decision *d)
{
    int outcome = d != NULL ? (int)d->outcome : CHARTER__V1__OUTCOME__UNKNOWN;
    bool tail = d != NULL && (d->n_codes > 0 || (d->witness != NULL && d->witness[0] != '\0'));
    fprintf(out, "%-8s %-10s ", text(action), text(target));
    if (tail)
        fprintf(out, "%-4s", cli_outcome_word(outcome));
    else
        fputs(cli_outcome_word(outcome), out);
    if (d != NULL)
        print_codes_witness(out, d->codes, d->n_codes, d->witness);
    fputc('\n', out);
}

static bool is_decision_event(const Charter__V1__Event *e)
{
    return e->outcome != CHARTER__V1__OUTCOME__OUTCOME_UNSPECIFIED ||
           strcmp(e->kind, "input_checked") == 0 || strcmp(e->kind, "delivery_decided") == 0;
}

static const char *detail_string(const json_t *detail, const char *key)
{
    const char *s = json_string_value(json_object_get(detail, key));
    return s != NULL && s[0] != '\0' ? s : NULL;
}

/* What a decision event decided about and toward whom, from its kind and detail (as the gate
 * writes it): a delivery names its recipient, an input check (a handoff into a step) and a
 * recorded output their step, a source read its resource. An explicit detail "action" wins. */
static void event_action(const Charter__V1__Event *e, char *action, size_t asz, char *target,
                         size_t tsz)
{
    static const struct {
        const char *kind, *action, *target_key;
    } kinds[] = {
        {"delivery_decided", "deliver", "recipient"}, {"input_checked", "handoff", "step"},
        {"source_read", "read", "resource"},          {"output_recorded", "record", "step"},
        {"output_refused", "record", "step"},
    };
    json_t *detail = NULL;
    const char *a = NULL, *t = NULL, *key = "step";

    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (strcmp(e->kind, kinds[i].kind) == 0) {
            a = kinds[i].action;
            key = kinds[i].target_key;
            break;
        }
    }
    if (e->detail != NULL && e->detail[0] != '\0')
        detail = json_loads(e->detail, 0, NULL);
    if (detail != NULL) {
        if (detail_string(detail, "action") != NULL)
            a = detail_string(detail, "action");
        t = detail_string(detail, key);
        if (t == NULL)
            t = detail_string(detail, "step");
    }
    snprintf(action, asz, "%s", text(a != NULL ? a : e->kind));
    snprintf(target, tsz, "%s", text(t));
    json_decref(detail);
}

void cli_print_decision_events(FILE *out, Charter__V1__Event *const *events, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const Charter__V1__Event *e = events[i];
        if (!is_decision_event(e))
            continue;
        char action[64], target[128];
        Charter__V1__Decision d = CHARTER__V1__DECISION__INIT;
        event_action(e, action, sizeof(action), target, sizeof(target));
        d.outcome = e->outcome;
        d.codes = e->codes;
        d.n_codes = e->n_codes;
        d.witness = e->witness;
        cli_print_decision(out, action, target, &d);
    }
}

void cli_print_run(FILE *out, const Charter__V1__Run *r)
{
    char created[32];
    if (r == NULL) {
        fputs("run       -\n", out);
        return;
    }
    cli_format_time(r->created_at, created, sizeof(created));
    fprintf(out, "run       %s\n", text(r->id));
    fprintf(out, "status    %s\n", text(r->status));
    fprintf(out, "mode      %s\n", text(r->mode));
    fprintf(out, "workflow  %s\n", text(r->workflow));
    fprintf(out, "task      %s\n", text(r->task));
    fprintf(out, "created   %s\n", created);
    fprintf(out, "events    %llu\n", (unsigned long long)r->seq);
}

void cli_print_events(FILE *out, Charter__V1__Event *const *events, size_t n)
{
    fprintf(out, "%-4s  %-20s  %-18s  %-7s  %s\n", "SEQ", "TIME", "KIND", "OUTCOME",
            "CODES  WITNESS | DETAIL");
    for (size_t i = 0; i < n; i++) {
        const Charter__V1__Event *e = events[i];
        char ts[32];
        cli_format_time(e->ts, ts, sizeof(ts));
        fprintf(out, "%-4llu  %-20s  %-18s  %-7s", (unsigned long long)e->seq, ts, text(e->kind),
                cli_outcome_word(e->outcome));
        if (is_decision_event(e)) {
            print_codes_witness(out, e->codes, e->n_codes, e->witness);
            if (e->n_codes == 0 && (e->witness == NULL || e->witness[0] == '\0') &&
                e->detail != NULL && e->detail[0] != '\0')
                fprintf(out, "  %s", e->detail);
        } else if (e->detail != NULL && e->detail[0] != '\0') {
            fprintf(out, "  %s", e->detail);
        }
        fputc('\n', out);
    }
}

void cli_print_deliveries(FILE *out, Charter__V1__Delivery *const *d, size_t n)
{
    fprintf(out, "%-24s  %-10s  %-10s  %-8s  %-5s  %-20s  %s\n", "INVOCATION", "RECIPIENT", "TOOL",
            "PAYLOAD", "SEQ", "COMMITTED", "GRANT CHAIN");
    for (size_t i = 0; i < n; i++) {
        char ts[32];
        cli_format_time(d[i]->committed_at, ts, sizeof(ts));
        fprintf(out, "%-24s  %-10s  %-10s  %-8s  %-5llu  %-20s  ", text(d[i]->invocation_id),
                text(d[i]->recipient), text(d[i]->tool), text(d[i]->payload_id),
                (unsigned long long)d[i]->event_seq, ts);
        print_list(out, d[i]->grant_chain, d[i]->n_grant_chain, " → ");
        fputc('\n', out);
    }
}

void cli_print_artifacts(FILE *out, Charter__V1__Artifact *const *a, size_t n)
{
    fprintf(out, "%-6s  %-7s  %-12s  %-9s  %-10s  %-30s  %s\n", "ID", "KIND", "CONF", "INTEGRITY",
            "STEP", "TITLE", "FROM");
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "%-6s  %-7s  %-12s  %-9s  %-10s  %-30s  ", text(a[i]->id), text(a[i]->kind),
                conf_word(a[i]->conf), integrity_word(a[i]->integrity), text(a[i]->step),
                text(a[i]->title));
        if (a[i]->n_resources > 0)
            print_list(out, a[i]->resources, a[i]->n_resources, ", ");
        else
            print_list(out, a[i]->parents, a[i]->n_parents, ", ");
        fputc('\n', out);
    }
}

void cli_print_run_view(FILE *out, const Charter__V1__RunView *v)
{
    cli_print_run(out, v->run);
    fputs("\ndecisions\n", out);
    cli_print_decision_events(out, v->events, v->n_events);
    fprintf(out, "\nevents (%zu)\n", v->n_events);
    cli_print_events(out, v->events, v->n_events);
    fprintf(out, "\ndeliveries (%zu)\n", v->n_deliveries);
    if (v->n_deliveries > 0)
        cli_print_deliveries(out, v->deliveries, v->n_deliveries);
    fprintf(out, "\nartifacts (%zu)\n", v->n_artifacts);
    if (v->n_artifacts > 0)
        cli_print_artifacts(out, v->artifacts, v->n_artifacts);
}

void cli_print_run_list(FILE *out, Charter__V1__Run *const *runs, size_t n)
{
    fprintf(out, "%-16s  %-11s  %-8s  %-6s  %-20s  %s\n", "RUN", "STATUS", "MODE", "EVENTS",
            "CREATED", "TASK");
    for (size_t i = 0; i < n; i++) {
        char ts[32];
        cli_format_time(runs[i]->created_at, ts, sizeof(ts));
        fprintf(out, "%-16s  %-11s  %-8s  %-6llu  %-20s  %s\n", text(runs[i]->id),
                text(runs[i]->status), text(runs[i]->mode), (unsigned long long)runs[i]->seq, ts,
                text(runs[i]->task));
    }
}

void cli_print_grant(FILE *out, const Charter__V1__Grant *g)
{
    char from[32], to[32], revoked[32];
    cli_format_time(g->valid_from, from, sizeof(from));
    cli_format_time(g->valid_to, to, sizeof(to));
    cli_format_time(g->revoked_at, revoked, sizeof(revoked));
    fprintf(out, "%s%s\n", text(g->id), g->root ? "  (root)" : "");
    fputs("  delegated from  ", out);
    print_list(out, g->parents, g->n_parents, ", ");
    fputs("\n  granted to      ", out);
    print_list(out, g->grantees, g->n_grantees, ", ");
    fputs("\n  issued by       ", out);
    print_list(out, g->issuers, g->n_issuers, ", ");
    fputs("\n  tools           ", out);
    print_list(out, g->tools, g->n_tools, ", ");
    fputs("\n  recipients      ", out);
    print_list(out, g->recipients, g->n_recipients, ", ");
    fputs("\n  resources       ", out);
    print_list(out, g->resources, g->n_resources, ", ");
    fprintf(out, "\n  valid           %s .. %s\n", from, to);
    fprintf(out, "  revoked         %s\n", g->revoked_at > 0 ? revoked : "no");
}

void cli_print_chain(FILE *out, const Charter__V1__GrantChain *c)
{
    fputs("chain  ", out);
    for (size_t i = 0; i < c->n_grants; i++)
        fprintf(out, "%s%s", i > 0 ? " → " : "", text(c->grants[i]->id));
    if (c->n_grants == 0)
        fputs("-", out);
    fputc('\n', out);
    cli_print_decision(out, "chain", c->n_grants > 0 ? c->grants[0]->id : "-", c->decision);
    for (size_t i = 0; i < c->n_grants; i++) {
        fputc('\n', out);
        cli_print_grant(out, c->grants[i]);
    }
}

void cli_print_artifact_line(FILE *out, const char *indent, const Charter__V1__Artifact *a)
{
    fprintf(out, "%s%s  %s  %s/%s  %s  \"%s\"", indent, text(a->id), text(a->kind),
            conf_word(a->conf), integrity_word(a->integrity), text(a->step),
            a->title != NULL ? a->title : "");
    if (a->n_resources > 0) {
        fputs("  ← ", out);
        print_list(out, a->resources, a->n_resources, ", ");
    }
    if (a->redacted)
        fputs("  (content redacted)", out);
}

/* ---- ancestry tree ------------------------------------------------------------------------ */

/* An artifact id and its index in the answer, sorted by id for lookup. */
typedef struct {
    const char *id;
    size_t index;
} trace_entry;

typedef struct {
    Charter__V1__Artifact *const *artifacts;
    size_t n;
    trace_entry *by_id;
    bool *shown; /* expanded already */
    char prefix[MAX_TREE_DEPTH * 6 + 8];
} trace_walk;

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const trace_entry *)a)->id, ((const trace_entry *)b)->id);
}

/* Index of the artifact with id, or n. */
static size_t trace_find(const trace_walk *w, const char *id)
{
    trace_entry key = {id, 0};
    const trace_entry *e = bsearch(&key, w->by_id, w->n, sizeof(*w->by_id), entry_cmp);
    return e != NULL ? e->index : w->n;
}

static void trace_node(FILE *out, trace_walk *w, const char *id, size_t plen, bool last, bool root,
                       int depth)
{
    size_t idx = trace_find(w, id);
    const char *branch = root ? "" : last ? "└─ " : "├─ ";

    fprintf(out, "%.*s%s", (int)plen, w->prefix, branch);
    if (idx == w->n) {
        fprintf(out, "%s  (not in the answer: lineage incomplete)\n", id);
        return;
    }
    const Charter__V1__Artifact *a = w->artifacts[idx];
    cli_print_artifact_line(out, "", a);
    if (w->shown[idx] && a->n_parents > 0) {
        fputs("  (ancestry shown above)\n", out);
        return;
    }
    fputc('\n', out);
    w->shown[idx] = true;
    if (depth >= MAX_TREE_DEPTH) {
        if (a->n_parents > 0)
            fprintf(out, "%.*s   …\n", (int)plen, w->prefix);
        return;
    }
    size_t next = plen;
    if (!root) {
        const char *pad = last ? "   " : "│  ";
        size_t padlen = strlen(pad);
        memcpy(w->prefix + plen, pad, padlen);
        next = plen + padlen;
    }
    for (size_t i = 0; i < a->n_parents; i++)
        trace_node(out, w, a->parents[i], next, i + 1 == a->n_parents, false, depth + 1);
}

void cli_print_trace(FILE *out, const char *root, Charter__V1__Artifact *const *artifacts, size_t n)
{
    trace_walk w;
    memset(&w, 0, sizeof(w));
    w.artifacts = artifacts;
    w.n = n;
    w.by_id = calloc(n > 0 ? n : 1, sizeof(*w.by_id));
    w.shown = calloc(n > 0 ? n : 1, sizeof(*w.shown));
    if (w.by_id == NULL || w.shown == NULL) {
        /* Out of memory: the flat table still shows every artifact. */
        free(w.by_id);
        free(w.shown);
        cli_print_artifacts(out, artifacts, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        w.by_id[i].id = artifacts[i]->id != NULL ? artifacts[i]->id : "";
        w.by_id[i].index = i;
    }
    qsort(w.by_id, n, sizeof(*w.by_id), entry_cmp);

    trace_node(out, &w, root, 0, true, true, 0);
    bool header = false;
    for (size_t i = 0; i < n; i++) {
        if (w.shown[i])
            continue;
        if (!header) {
            fputs("\nalso in the answer, not reached from the root:\n", out);
            header = true;
        }
        cli_print_artifact_line(out, "  ", artifacts[i]);
        fputs("  parents ", out);
        print_list(out, artifacts[i]->parents, artifacts[i]->n_parents, ", ");
        fputc('\n', out);
    }
    fprintf(out, "\n%zu artifact%s in the ancestry\n", n, n == 1 ? "" : "s");
    free(w.by_id);
    free(w.shown);
}

void cli_print_step_context(FILE *out, const Charter__V1__StepContext *s)
{
    fprintf(out, "context     %s\n", text(s->context_id));
    fprintf(out, "run         %s\n", text(s->run_id));
    fprintf(out, "step        %s\n", text(s->step));
    fprintf(out, "actor       %s\n", text(s->actor));
    fprintf(out, "grant       %s\n", text(s->grant));
    fputs("tools       ", out);
    print_list(out, s->tools, s->n_tools, ", ");
    fputs("\nrecipients  ", out);
    print_list(out, s->recipients, s->n_recipients, ", ");
    fputs("\nresources   ", out);
    print_list(out, s->resources, s->n_resources, ", ");
    fputc('\n', out);
    if (s->parent_context_id != NULL && s->parent_context_id[0] != '\0')
        fprintf(out, "parent      %s (narrowed from it)\n", s->parent_context_id);
    fprintf(out, "workflow    %s\n", text(s->workflow));
}

void cli_print_health(FILE *out, const Charter__V1__HealthResponse *h)
{
    fprintf(out, "status           %s\n", text(h->status));
    fprintf(out, "database         %s\n", text(h->database));
    fprintf(out, "graph            %s\n", text(h->graph));
    fprintf(out, "version          %s\n", text(h->version));
    fprintf(out, "library_version  %s\n", text(h->library_version));
    fprintf(out, "workers          %u\n", (unsigned)h->workers);
}
