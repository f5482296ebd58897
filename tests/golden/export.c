/*
 * export.c - golden_export: writes the decision events of a graph's runs, each with the facts
 * its snapshot names put back together, as one JSON document the golden corpus keeps
 * (tests/golden/README.md). It only reads: record.sh runs it against the Redis of a charterd
 * it drove, and test_golden replays what it wrote with no database at all.
 *
 * Usage: golden_export REDIS_URL GRAPH [RUN...]
 *   REDIS_URL  unix:///path/redis.sock or tcp://host:port (charterd's --redis)
 *   GRAPH      the graph (tenant) the runs live in; charterd's default is "charter"
 *   RUN...     the runs to export (default: every run of the graph, oldest first)
 * Output (stdout): {"entries":[{"name","gate","event":{run_id,seq,kind,outcome,codes,witness,
 * evaluator,snapshot}}]}, the snapshot as the JSON object it encodes, every lineage, blob and
 * facts reference in it resolved. Exit status 0, 1 when a run or event cannot be read, 2 on
 * bad usage.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/store.h"
#include "evidence/evlog.h"

static const char *text_of(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s != NULL ? s : "";
}

/* A name that says what the entry decided: "<gate> <kind> <outcome> [<codes>]". */
static json_t *entry_name(const json_t *snap, const json_t *event)
{
    char name[256];
    const char *codes = text_of(event, "codes");
    snprintf(name, sizeof name, "%s %s %s%s%s", text_of(snap, "gate"), text_of(event, "kind"),
             text_of(event, "outcome"), *codes ? " " : "", codes);
    return json_string(name);
}

/* The decision event seq of run_id with its facts put back together, appended to entries.
 * Returns 0, or 1 (said on stderr) when it cannot be read. */
static int export_event(store *st, const char *run_id, json_int_t seq, json_t *entries)
{
    char seqtext[24], why[256];
    snprintf(seqtext, sizeof seqtext, "%lld", (long long)seq);
    json_t *event = NULL;
    char *facts = NULL;
    if (q_get_event(st, run_id, seqtext, &event) != STATUS_OK ||
        evlog_snapshot_resolve(st, text_of(event, "snapshot"), &facts, why, sizeof why) !=
            STATUS_OK) {
        fprintf(stderr, "golden_export: event %s of run %s: %s\n", seqtext, run_id,
                facts == NULL && event != NULL ? why : store_last_error(st));
        json_decref(event);
        return 1;
    }
    json_t *snap = *facts ? json_loads(facts, 0, NULL) : json_null();
    free(facts);
    json_t *kept =
        json_pack("{s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:O}", "run_id", run_id, "seq", seq, "kind",
                  text_of(event, "kind"), "outcome", text_of(event, "outcome"), "codes",
                  text_of(event, "codes"), "witness", text_of(event, "witness"), "evaluator",
                  text_of(event, "evaluator"), "snapshot", snap);
    json_t *entry = kept != NULL ? json_pack("{s:o, s:s, s:o}", "name", entry_name(snap, event),
                                             "gate", text_of(snap, "gate"), "event", kept)
                                 : NULL;
    json_decref(snap);
    json_decref(event);
    return entry != NULL && json_array_append_new(entries, entry) == 0 ? 0 : 1;
}

/* Every decision event of run_id (those with an outcome), in seq order. */
static int export_run(store *st, const char *run_id, json_t *entries)
{
    json_t *run = NULL;
    if (q_get_run(st, run_id, "0", "100000", "0", "", NULL, &run) != STATUS_OK) {
        fprintf(stderr, "golden_export: run %s: %s\n", run_id, store_last_error(st));
        return 1;
    }
    const json_t *events = json_object_get(run, "events");
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < json_array_size(events); i++) {
        const json_t *e = json_array_get(events, i);
        if (*text_of(e, "outcome") != '\0')
            rc = export_event(st, run_id, json_integer_value(json_object_get(e, "seq")), entries);
    }
    json_decref(run);
    return rc;
}

/* The ids of every run of the graph, oldest first (new reference). */
static json_t *every_run(store *st)
{
    json_t *list = NULL;
    if (q_list_runs(st, "100000", &list) != STATUS_OK)
        return NULL;
    json_t *ids = json_array();
    const json_t *runs = json_object_get(list, "runs");
    for (size_t i = json_array_size(runs); ids != NULL && i > 0; i--)
        json_array_append_new(ids, json_string(text_of(json_array_get(runs, i - 1), "id")));
    json_decref(list);
    return ids;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: golden_export REDIS_URL GRAPH [RUN...]\n");
        return 2;
    }
    store *st = NULL;
    if (store_open(argv[1], argv[2], 10000, &st) != STATUS_OK) {
        fprintf(stderr, "golden_export: cannot reach Redis at %s (is charterd's database up?)\n",
                argv[1]);
        return 1;
    }
    json_t *ids = json_array();
    for (int i = 3; ids != NULL && i < argc; i++)
        json_array_append_new(ids, json_string(argv[i]));
    if (argc == 3) {
        json_decref(ids);
        ids = every_run(st);
    }
    json_t *entries = json_array();
    int rc = ids != NULL && entries != NULL ? 0 : 1;
    for (size_t i = 0; rc == 0 && i < json_array_size(ids); i++)
        rc = export_run(st, json_string_value(json_array_get(ids, i)), entries);
    json_t *doc = rc == 0 ? json_pack("{s:O}", "entries", entries) : NULL;
    if (doc != NULL &&
        json_dumpf(doc, stdout, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) == 0)
        fputc('\n', stdout);
    else
        rc = 1;
    json_decref(doc);
    json_decref(entries);
    json_decref(ids);
    store_close(st);
    return rc;
}
