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

/* Display width of UTF-8 text: code points, not bytes (the arrows and ellipses are one each). */
static size_t display_width(const char *s)
{
    size_t w = 0;
    for (; s != NULL && *s != '\0'; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

/* Prints s and pads it with spaces to width columns. */
/* Writes s with every control character (C0, DEL, and C1 as UTF-8) shown as '?': text that
 * came from a host or a model (titles, witnesses) must not drive the operator's terminal. */
static void put_safe_n(FILE *out, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    for (; s != NULL && p < end && *p != '\0'; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            fputc('?', out);
        } else if (*p == 0xc2 && p + 1 < end && p[1] >= 0x80 && p[1] <= 0x9f) {
            fputc('?', out);
            p++;
        } else {
            fputc(*p, out);
        }
    }
}

static void put_safe(FILE *out, const char *s)
{
    put_safe_n(out, s, s != NULL ? strlen(s) : 0);
}

static void print_padded(FILE *out, const char *s, size_t width)
{
    size_t w = display_width(s);
    put_safe(out, s);
    for (; w < width; w++)
        fputc(' ', out);
}

/* Widens *width to fit s. */
static void fit(size_t *width, const char *s)
{
    size_t w = display_width(text(s));
    if (w > *width)
        *width = w;
}

const char *cli_short_hash(const char *s, char *buf, size_t size)
{
    size_t n = s != NULL ? strlen(s) : 0;
    if (n < 40 || strspn(s, "0123456789abcdef") != n || size < CLI_SHORT_HASH_LEN + 4)
        return text(s);
    snprintf(buf, size, "%.*s…", CLI_SHORT_HASH_LEN, s);
    return buf;
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
    if (witness != NULL && witness[0] != '\0') {
        fputs("  ", out);
        put_safe(out, witness);
    }
}

/* A decision line with the action and target columns action_w and target_w wide. */
static void print_decision_aligned(FILE *out, const char *action, size_t action_w,
                                   const char *target, size_t target_w,
                                   const Charter__V1__Decision *d)
{
    int outcome = d != NULL ? (int)d->outcome : CHARTER__V1__OUTCOME__UNKNOWN;
    bool tail = d != NULL && (d->n_codes > 0 || (d->witness != NULL && d->witness[0] != '\0'));
    print_padded(out, text(action), action_w);
    fputc(' ', out);
    print_padded(out, text(target), target_w);
    fputc(' ', out);
    if (tail)
        fprintf(out, "%-4s", cli_outcome_word(outcome));
    else
        fputs(cli_outcome_word(outcome), out);
    if (d != NULL)
        print_codes_witness(out, d->codes, d->n_codes, d->witness);
    fputc('\n', out);
}

void cli_print_decision(FILE *out, const char *action, const char *target,
                        const Charter__V1__Decision *d)
{
    size_t aw = 8, tw = 10;
    fit(&aw, action);
    fit(&tw, target);
    print_decision_aligned(out, action, aw, target, tw, d);
}

void cli_print_replay(FILE *out, const char *seq, const Charter__V1__ReplayDecisionResponse *r)
{
    cli_print_decision(out, "recorded", seq, r->recorded);
    if (r->no_snapshot)
        fprintf(out, "replayed %-10s -  (no snapshot: the event records no facts to replay)\n",
                seq);
    else
        cli_print_decision(out, "replayed", seq, r->replayed);
    fprintf(out, "matches  %s\nevaluator %s\n",
            r->no_snapshot ? "- (nothing to replay)"
            : r->matches   ? "yes"
                           : "NO",
            text(r->evaluator));
    if (r->before_versions)
        fprintf(out,
                "version  %u (recorded before evaluator versions were declared: its fingerprint "
                "is not checked)\n",
                r->evaluator_version);
    else if (!r->no_snapshot)
        fprintf(out, "version  %u\n", r->evaluator_version);
    if (r->archive != NULL && *r->archive)
        fprintf(out, "archive  %s (the run left the database)\n", r->archive);
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

/* The action and target of every decision event, and how many there are. */
static size_t decision_columns(Charter__V1__Event *const *events, size_t n, size_t *action_w,
                               size_t *target_w)
{
    size_t count = 0;
    *action_w = 8; /* the widths single decision lines have, so both read alike */
    *target_w = 10;
    for (size_t i = 0; i < n; i++) {
        char action[64], target[128];
        if (!is_decision_event(events[i]))
            continue;
        event_action(events[i], action, sizeof(action), target, sizeof(target));
        fit(action_w, action);
        fit(target_w, target);
        count++;
    }
    return count;
}

void cli_print_decision_events(FILE *out, Charter__V1__Event *const *events, size_t n)
{
    size_t aw, tw;
    decision_columns(events, n, &aw, &tw);
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
        print_decision_aligned(out, action, aw, target, tw, &d);
    }
}

void cli_print_run(FILE *out, const Charter__V1__Run *r)
{
    char created[32];
    if (r == NULL) {
        fputs("run       -\n", out);
        return;
    }
    char version[32];
    cli_format_time(r->created_at, created, sizeof(created));
    fprintf(out, "run       %s\n", text(r->id));
    fprintf(out, "status    %s\n", text(r->status));
    fprintf(out, "mode      %s\n", text(r->mode));
    fprintf(out, "workflow  %s\n", cli_short_hash(r->workflow, version, sizeof(version)));
    fprintf(out, "task      %s\n", text(r->task));
    fprintf(out, "created   %s\n", created);
    fprintf(out, "events    %llu\n", (unsigned long long)r->seq);
}

/* An event's detail for people: a JSON object as "key value" pairs (lists joined by ","), any
 * other text as it is. Returns a string the caller frees, or NULL (then print the raw text). */
static char *detail_words(const char *detail)
{
    json_t *j = json_loads(detail, JSON_DECODE_ANY, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    size_t cap = strlen(detail) + 64, used = 0;
    char *buf = malloc(cap);
    const char *key;
    json_t *v;
    if (buf == NULL) {
        json_decref(j);
        return NULL;
    }
    buf[0] = '\0';
    json_object_foreach(j, key, v)
    {
        char *val = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        const char *shown = json_is_string(v) ? json_string_value(v) : val;
        if (shown == NULL)
            shown = "?";
        if (json_is_array(v) && val != NULL) {
            /* ["a1","a2"] reads as a1,a2 */
            size_t k = 0;
            for (const char *p = val; *p != '\0'; p++)
                if (*p != '[' && *p != ']' && *p != '"')
                    val[k++] = *p;
            val[k] = '\0';
        }
        size_t need = used + strlen(key) + strlen(shown) + 4;
        if (need > cap) {
            char *grown = realloc(buf, need * 2);
            if (grown == NULL) {
                free(val);
                free(buf);
                json_decref(j);
                return NULL;
            }
            buf = grown;
            cap = need * 2;
        }
        used += (size_t)snprintf(buf + used, cap - used, "%s%s %s", used > 0 ? "  " : "", key,
                                 shown[0] != '\0' ? shown : "-");
        free(val);
    }
    json_decref(j);
    return buf;
}

/* Prints s from column col, wrapped at CLI_TABLE_WIDTH at spaces, each further line indented
 * to indent columns; a word longer than the width is left whole. */
static void print_wrapped(FILE *out, const char *s, size_t col, size_t indent)
{
    size_t avail = CLI_TABLE_WIDTH > col ? CLI_TABLE_WIDTH - col : 20;
    while (*s != '\0') {
        size_t len = strlen(s);
        if (display_width(s) <= avail) {
            put_safe(out, s);
            return;
        }
        /* The last space within the first avail columns, counted in code points. */
        size_t cut = 0, w = 0, i = 0;
        for (; s[i] != '\0' && w <= avail; i++) {
            if (((unsigned char)s[i] & 0xC0) != 0x80)
                w++;
            if (s[i] == ' ' && w <= avail)
                cut = i;
        }
        if (cut == 0) {
            const char *sp = strchr(s, ' ');
            cut = sp != NULL ? (size_t)(sp - s) : len;
        }
        size_t keep = cut;
        while (keep > 0 && s[keep - 1] == ' ')
            keep--;
        put_safe_n(out, s, keep);
        s += cut;
        while (*s == ' ')
            s++;
        if (*s != '\0')
            fprintf(out, "\n%*s", (int)indent, "");
        avail = CLI_TABLE_WIDTH > indent ? CLI_TABLE_WIDTH - indent : 20;
    }
}

/* The event rows with SEQ and KIND columns seq_w and kind_w wide, under a header if header. */
static void print_events(FILE *out, Charter__V1__Event *const *events, size_t n, size_t seq_w,
                         size_t kind_w, bool header)
{
    /* SEQ  TIME(20)  KIND  OUTCOME(7)  then the rest, wrapped under its own column. */
    size_t col = seq_w + 2 + 20 + 2 + kind_w + 2 + 7 + 2;
    if (header) {
        print_padded(out, "SEQ", seq_w);
        fputs("  ", out);
        print_padded(out, "TIME", 20);
        fputs("  ", out);
        print_padded(out, "KIND", kind_w);
        fputs("  OUTCOME  CODES  WITNESS | DETAIL\n", out);
    }
    for (size_t i = 0; i < n; i++) {
        const Charter__V1__Event *e = events[i];
        char ts[32], seq[24];
        cli_format_time(e->ts, ts, sizeof(ts));
        snprintf(seq, sizeof(seq), "%llu", (unsigned long long)e->seq);
        print_padded(out, seq, seq_w);
        fputs("  ", out);
        print_padded(out, ts, 20);
        fputs("  ", out);
        print_padded(out, text(e->kind), kind_w);
        fputs("  ", out);
        print_padded(out, cli_outcome_word(e->outcome), 7);
        fputs("  ", out);
        bool has_detail = e->detail != NULL && e->detail[0] != '\0';
        bool decided = e->n_codes > 0 || (e->witness != NULL && e->witness[0] != '\0');
        if (is_decision_event(e) && decided) {
            size_t len = 0;
            for (size_t k = 0; k < e->n_codes; k++)
                len += strlen(e->codes[k]) + 1;
            char *line = malloc(len + strlen(text(e->witness)) + 4);
            if (line != NULL) {
                size_t used = 0;
                for (size_t k = 0; k < e->n_codes; k++)
                    used += (size_t)sprintf(line + used, "%s%s", k > 0 ? "," : "", e->codes[k]);
                if (e->witness != NULL && e->witness[0] != '\0')
                    sprintf(line + used, "%s%s", used > 0 ? "  " : "", e->witness);
                print_wrapped(out, line, col, col);
                free(line);
            }
        } else if (has_detail) {
            char *words = detail_words(e->detail);
            print_wrapped(out, words != NULL ? words : e->detail, col, col);
            free(words);
        }
        fputc('\n', out);
    }
}

void cli_print_events(FILE *out, Charter__V1__Event *const *events, size_t n)
{
    size_t seq_w = 3, kind_w = 4;
    for (size_t i = 0; i < n; i++) {
        char seq[24];
        snprintf(seq, sizeof(seq), "%llu", (unsigned long long)events[i]->seq);
        fit(&seq_w, seq);
        fit(&kind_w, events[i]->kind);
    }
    print_events(out, events, n, seq_w, kind_w, true);
}

void cli_print_events_follow(FILE *out, Charter__V1__Event *const *events, size_t n,
                             bool *header_done)
{
    if (n == 0)
        return;
    /* Fixed widths, so batches printed as they arrive line up under one header: SEQ 5, KIND 18
     * (the longest kind, approval_requested, fits; a longer one pushes its row only). */
    print_events(out, events, n, 5, 18, !*header_done);
    *header_done = true;
}

void cli_print_deliveries(FILE *out, Charter__V1__Delivery *const *d, size_t n)
{
    size_t inv_w = 10, rcp_w = 9, tool_w = 4, pay_w = 7;
    for (size_t i = 0; i < n; i++) {
        fit(&inv_w, d[i]->invocation_id);
        fit(&rcp_w, d[i]->recipient);
        fit(&tool_w, d[i]->tool);
        fit(&pay_w, d[i]->payload_id);
    }
    print_padded(out, "INVOCATION", inv_w);
    fputs("  ", out);
    print_padded(out, "RECIPIENT", rcp_w);
    fputs("  ", out);
    print_padded(out, "TOOL", tool_w);
    fputs("  ", out);
    print_padded(out, "PAYLOAD", pay_w);
    fprintf(out, "  %-5s  %-20s  %s\n", "SEQ", "COMMITTED", "GRANT CHAIN");
    for (size_t i = 0; i < n; i++) {
        char ts[32];
        cli_format_time(d[i]->committed_at, ts, sizeof(ts));
        print_padded(out, text(d[i]->invocation_id), inv_w);
        fputs("  ", out);
        print_padded(out, text(d[i]->recipient), rcp_w);
        fputs("  ", out);
        print_padded(out, text(d[i]->tool), tool_w);
        fputs("  ", out);
        print_padded(out, text(d[i]->payload_id), pay_w);
        fprintf(out, "  %-5llu  %-20s  ", (unsigned long long)d[i]->event_seq, ts);
        print_list(out, d[i]->grant_chain, d[i]->n_grant_chain, " → ");
        fputc('\n', out);
    }
}

void cli_print_artifacts(FILE *out, Charter__V1__Artifact *const *a, size_t n)
{
    size_t id_w = 2, step_w = 4, title_w = 5;
    for (size_t i = 0; i < n; i++) {
        fit(&id_w, a[i]->id);
        fit(&step_w, a[i]->step);
        fit(&title_w, a[i]->title);
    }
    print_padded(out, "ID", id_w);
    fprintf(out, "  %-7s  %-12s  %-9s  ", "KIND", "CONF", "INTEGRITY");
    print_padded(out, "STEP", step_w);
    fputs("  ", out);
    print_padded(out, "TITLE", title_w);
    fputs("  FROM\n", out);
    for (size_t i = 0; i < n; i++) {
        print_padded(out, text(a[i]->id), id_w);
        fprintf(out, "  %-7s  %-12s  %-9s  ", text(a[i]->kind), conf_word(a[i]->conf),
                integrity_word(a[i]->integrity));
        print_padded(out, text(a[i]->step), step_w);
        fputs("  ", out);
        print_padded(out, text(a[i]->title), title_w);
        fputs("  ", out);
        if (a[i]->n_resources > 0)
            print_list(out, a[i]->resources, a[i]->n_resources, ", ");
        else
            print_list(out, a[i]->parents, a[i]->n_parents, ", ");
        fputc('\n', out);
    }
}

void cli_print_run_view(FILE *out, const Charter__V1__RunView *v)
{
    size_t aw, tw;
    cli_print_run(out, v->run);
    /* Sections with nothing in them are one line, not a heading over nothing. */
    if (decision_columns(v->events, v->n_events, &aw, &tw) > 0) {
        fputs("\ndecisions\n", out);
        cli_print_decision_events(out, v->events, v->n_events);
    }
    if (v->n_events > 0) {
        unsigned long long first = v->events[0]->seq, last = v->events[v->n_events - 1]->seq;
        unsigned long long total = v->run != NULL ? v->run->seq : last;
        if (first > 1 || last < total)
            fprintf(out, "\nevents %llu-%llu of %llu (more: --after %llu)\n", first, last, total,
                    last);
        else
            fprintf(out, "\nevents (%zu)\n", v->n_events);
        cli_print_events(out, v->events, v->n_events);
    } else {
        fputs("\nevents: none in this range\n", out);
    }
    if (v->n_deliveries > 0) {
        fprintf(out, "\ndeliveries (%zu)\n", v->n_deliveries);
        cli_print_deliveries(out, v->deliveries, v->n_deliveries);
    } else {
        fputs("\ndeliveries: none\n", out);
    }
    /* Human approvals: only a run that has any gets the section. */
    if (v->n_approvals > 0) {
        fprintf(out, "\napprovals (%zu)\n", v->n_approvals);
        for (size_t i = 0; i < v->n_approvals; i++) {
            const Charter__V1__Approval *a = v->approvals[i];
            bool decided = a->decided_by != NULL && *a->decided_by != '\0';
            char when[32];
            cli_format_time(decided ? a->decided_at : a->deadline, when, sizeof when);
            fprintf(out, "%s  %s  %s %s to %s  approver %s  %s %s%s%s\n", a->id, a->state, a->tool,
                    a->payload_id, a->recipient, a->approver, decided ? "decided" : "deadline",
                    when, decided ? " by " : "", decided ? a->decided_by : "");
        }
    }
    if (v->n_artifacts > 0) {
        fprintf(out, "\nartifacts (%zu)\n", v->n_artifacts);
        cli_print_artifacts(out, v->artifacts, v->n_artifacts);
    } else {
        fputs("\nartifacts: none\n", out);
    }
}

void cli_print_run_list(FILE *out, Charter__V1__Run *const *runs, size_t n)
{
    size_t id_w = 3, status_w = 6, mode_w = 4;
    for (size_t i = 0; i < n; i++) {
        fit(&id_w, runs[i]->id);
        fit(&status_w, runs[i]->status);
        fit(&mode_w, runs[i]->mode);
    }
    print_padded(out, "RUN", id_w);
    fputs("  ", out);
    print_padded(out, "STATUS", status_w);
    fputs("  ", out);
    print_padded(out, "MODE", mode_w);
    fprintf(out, "  %-6s  %-20s  %s\n", "EVENTS", "CREATED", "TASK");
    size_t col = id_w + 2 + status_w + 2 + mode_w + 2 + 6 + 2 + 20 + 2;
    for (size_t i = 0; i < n; i++) {
        char ts[32];
        cli_format_time(runs[i]->created_at, ts, sizeof(ts));
        print_padded(out, text(runs[i]->id), id_w);
        fputs("  ", out);
        print_padded(out, text(runs[i]->status), status_w);
        fputs("  ", out);
        print_padded(out, text(runs[i]->mode), mode_w);
        fprintf(out, "  %-6llu  %-20s  ", (unsigned long long)runs[i]->seq, ts);
        print_wrapped(out, text(runs[i]->task), col, col);
        fputc('\n', out);
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
    fprintf(out, "%s%s  %s  %s/%s  %s  \"", indent, text(a->id), text(a->kind), conf_word(a->conf),
            integrity_word(a->integrity), text(a->step));
    put_safe(out, a->title != NULL ? a->title : "");
    fputc('"', out);
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
    char version[CLI_SHORT_HASH_LEN + 8];
    fprintf(out, "workflow    %s\n", cli_short_hash(s->workflow, version, sizeof version));
}

void cli_print_health(FILE *out, const Charter__V1__HealthResponse *h)
{
    fprintf(out, "status           %s\n", text(h->status));
    fprintf(out, "database         %s\n", text(h->database));
    fprintf(out, "graph            %s\n", text(h->graph));
    fprintf(out, "version          %s\n", text(h->version));
    fprintf(out, "library_version  %s\n", text(h->library_version));
    fprintf(out, "workers          %u\n", (unsigned)h->workers);
    /* Who the call was, when it was someone: the tenant it acted on and the caller events
     * record. */
    if (h->caller != NULL && h->caller[0] != '\0') {
        fprintf(out, "tenant           %s\n", text(h->tenant));
        fprintf(out, "caller           %s (%s)\n", h->caller, text(h->role));
    }
}
