/*
 * cli_help.c - each command's options and an example, for `charter help COMMAND` (see
 * cli_help.h). Kept beside the command table rather than in it, so the table stays one line of
 * facts per command and the prose can grow without widening it. The package test checks that
 * every command prints a usage through this path.
 */
#include "cli_help.h"

#include <string.h>

typedef struct {
    const char *name;
    const char *options; /* lines "  --opt VALUE  what", or NULL */
    const char *example; /* one or more command lines */
} cli_help_entry;

static const cli_help_entry entries[] = {
    {"run",
     "  --task TEXT        the run's task (default: the workflow's own)\n"
     "  --mode MODE        scripted (default: drive it to its end), live (a model provider),\n"
     "                     external (a host opens steps and calls the gates itself)\n"
     "  --workflow REF     a workflow applied to the graph, by name or version (default: the\n"
     "                     one charterd started with)\n"
     "  --async            return as soon as the run is queued (follow it with charter wait)\n"
     "  --budget NAME=N    a budget the run may not exceed: max_wall_clock_ms, max_model_calls,\n"
     "                     max_steps or max_deliveries (repeatable); the run ends\n"
     "                     budget_exhausted naming it\n",
     "charter run\n"
     "charter run --mode external --workflow support\n"
     "charter run --async --mode live --budget max_model_calls=3 --budget max_wall_clock_ms=60000"},
    {"wait",
     "  --timeout-ms MS    give up after MS milliseconds (default: wait until the run ends)\n",
     "charter wait RUN\n"
     "charter --json wait RUN --timeout-ms 60000"},
    {"cancel", "  --reason TEXT      recorded with the run's cancellation\n",
     "charter cancel RUN --reason 'wrong vendor list'"},
    {"complete", "  --reason TEXT      recorded with the run's end (default: completed)\n",
     "charter complete RUN --reason 'the agent session ended'\n"
     "charter receipt RUN"},
    {"checkpoint", NULL,
     "charter checkpoint RUN > run.ckpt\n"
     "charter --json checkpoint RUN | jq -r .token"},
    {"resume", NULL,
     "charter resume run.ckpt && charter wait RUN\n"
     "charter checkpoint RUN | charter resume -"},
    {"get",
     "  --after N          only events with seq above N\n"
     "  --limit N          at most N events (default 1000)\n",
     "charter get RUN\n"
     "charter get RUN --after 10 --limit 5\n"
     "charter --json get RUN | jq '.events[] | select(.outcome==\"DENY\")'"},
    {"list", "  --limit N          at most N runs, newest first\n", "charter list --limit 5"},
    {"recover",
     "  --async            return as soon as the recovery is queued (follow it with charter "
     "wait)\n",
     "charter recover RUN\n"
     "charter recover --async RUN && charter wait RUN"},
    {"revoke", NULL, "charter revoke g_reporter"},
    {"tenant",
     "  --max-runs N          runs the tenant may create (0: unlimited)\n"
     "  --max-artifacts N     artifacts it may write through ReadSource and RecordOutput\n"
     "  --calls-per-second N  calls naming it per second of the database's clock\n"
     "  --retention DURATION  how long its ended runs stay in the database before they are\n"
     "                        archived and removed (30d, 12h, 90m, 45s; default: charterd's)\n"
     "  --invocation-window DURATION\n"
     "                        how long the record of each invocation of an archived run stays\n"
     "                        in the database, answering retries (default: charterd's)\n",
     "CHARTER_TOKEN=$CHARTER_ADMIN_TOKEN charter tenant create acme --max-runs 100\n"
     "CHARTER_TOKEN=$CHARTER_ADMIN_TOKEN charter tenant list"},
    {"credential",
     "  --actors A,B       for a host: the actors whose contexts it may use\n"
     "  --label L          a note kept with the credential (at most 128 bytes)\n",
     "charter --token chc_... credential issue host --actors analyst --label 'analyst host'\n"
     "charter credential list\n"
     "charter credential revoke 3f9a0c1e5b7d2a44"},
    {"restore", "  --all              restore every revoked grant of the graph\n",
     "charter restore g_reporter\ncharter restore --all"},
    {"quarantine", "  --reason TEXT      why (1 to 512 bytes): the refusals' witnesses show it\n",
     "charter quarantine vendor_a --reason 'the vendor site served injected text'"},
    {"release", NULL, "charter release vendor_a"},
    {"chain", NULL, "charter chain g_reporter"},
    {"trace", NULL, "charter trace a7"},
    {"health", NULL, "charter health\ncharter --url tcp://10.0.0.5:7433 health"},
    {"open-step",
     "  --parent CTX       open a child context of CTX, narrowed to the lists below\n"
     "  --tools A,B        tools the child may use (a subset of the parent's)\n"
     "  --recipients A,B   recipients the child may deliver to (a subset)\n"
     "  --resources A,B    resources the child may read (a subset)\n",
     "charter open-step RUN research\n"
     "charter open-step RUN research --parent c1 --resources vendor_a"},
    {"read-source", NULL, "charter read-source c1 vendor_a"},
    {"record-output",
     "  --title T          the output's title\n"
     "  --content C        its content, or\n"
     "  --content-file F   its content from file F (- for stdin)\n",
     "charter record-output c1 --title 'Research summary' --content-file out.txt a1 a2"},
    {"check-input", NULL, "charter check-input c2 a4 a1"},
    {"deliver", NULL, "charter deliver c2 a6 cfo deliver_internal RUN:analyze:deliver"},
    {"replay",
     "  --archive FILE     offline, no charterd: decide event SEQ of an archived run again from\n"
     "                     its archive file alone (docs/archive.md)\n",
     "charter replay RUN 14\n"
     "charter replay --archive var/charter/archive/charter/2026-12-01/r1.charter-archive 14"},
    {"receipt", NULL,
     "charter receipt RUN\n"
     "charter --json receipt RUN RUN:report:deliver > receipt.json"},
    {"verify-receipt",
     "  --key KEYFILE      the integrity key charterd seals with: checks each receipt's MAC\n"
     "  --public-key PEM   the public key of charterd's --signing-key (charter receipt-key):\n"
     "                     checks each receipt's Ed25519 signature and, given several receipts\n"
     "                     of one run, their chain (in order, none missing between them)\n",
     "charter verify-receipt receipt.json --key /var/lib/charter/integrity.key\n"
     "charter verify-receipt r1.json r2.json r3.json --public-key charter-receipts.pem\n"
     "charter --json verify-receipt receipt.json --key key.txt"},
    {"receipt-key", NULL, "charter receipt-key > charter-receipts.pem"},
    {"audit",
     "  --archive PATH     offline, no charterd: an archived run's file, or a graph's archive\n"
     "                     folder (its index and every file it names); damage is named by line\n"
     "  --key KEYFILE      with --archive: the graph's integrity key (a keyed graph's archives)\n",
     "charter audit RUN\n"
     "charter audit --archive var/charter/archive/charter/2026-12-01/r1.charter-archive --key "
     "var/charter/integrity.key"},
    {"workflow", NULL,
     "charter workflow validate my-workflow.json\n"
     "charter workflow test deploy/workflows/procurement.test.json\n"
     "charter workflow list\n"
     "charter workflow show procurement\n"
     "charter workflow apply deploy/workflows/support.json\n"
     "charter workflow rehearse deploy/workflows/support.json"},
    {"help", NULL, "charter help\ncharter help get"},
    {"methods", NULL,
     "charter methods\n"
     "charter --json methods | jq -r '.methods[].name'"},
    {"what-if",
     "  --workflow FILE    the candidate workflow definition (JSON), required\n"
     "  --run RUN          only the decisions of RUN\n"
     "  --since SECONDS    only runs created at or after SECONDS since the epoch\n"
     "Without --run, the runs of the candidate's workflow name are examined.\n"
     "  --archive PATH     offline, no charterd: the decisions of an archived run's file, or of\n"
     "                     every run a graph's archive folder indexes; each archive is audited\n"
     "                     first and a damaged one is refused (docs/archive.md)\n"
     "  --key KEYFILE      with --archive: the graph's integrity key (a keyed graph's archives)\n"
     "  --limit N          at most N decisions examined (truncation is reported)\n",
     "charter what-if --workflow stricter.json --run RUN\n"
     "charter --json what-if --workflow stricter.json --since 1796000000\n"
     "charter what-if --workflow stricter.json --archive var/charter/archive/charter --key "
     "var/charter/integrity.key"},
    {"ingest", NULL,
     "charter ingest chunks.json   # {\"chunks\": [{\"chunkId\": \"c1\", \"resourceId\": "
     "\"budget\", \"tenant\": \"finance\", \"visibility\": \"confidential\", "
     "\"revision\": 1, \"text\": \"...\"}]}"},
    {"scope-bind",
     "  --principal P          who the scope serves, required\n"
     "  --filter FIELD=V,V     tenant, resource_id or visibility; repeat per field; FIELD=\n"
     "                         (no values) denies every document for that field\n"
     "  --unrestricted yes     no filters (the step's resources still bound it)\n"
     "  --task T               the task the scope is bound to\n"
     "  --expires-in-ms N      no search after N ms (database clock)\n"
     "  --max-follow-ups N     follow-up budget (default 5)\n",
     "charter scope-bind CTX --principal alice --filter tenant=vendors --max-follow-ups 3"},
    {"scope-narrow",
     "  --filter FIELD=V,V     replaces the parent's values of FIELD with a subset of them\n"
     "  --expires-in-ms N      an earlier expiry than the parent's\n"
     "  --max-follow-ups N     a smaller budget than the parent's\n",
     "charter scope-narrow s1 --filter resource_id=vendor_a"},
    {"search", "  --limit N              at most N hits (1..100, default 5)\n",
     "charter search s1 'standing desk warranty' --limit 3"},
    {"follow-up", NULL,
     "charter follow-up q1 '{\"query\": \"Cascade ceiling\", \"reason\": \"named by q1\"}'"},
    {"scope-checkpoint",
     "  --principal P          the scope's principal, required\n"
     "  --task T               the task the checkpoint is bound to\n",
     "charter scope-checkpoint s1 --principal alice --task 'desk refit'"},
    {"scope-resume",
     "  --principal P          must be the checkpoint's, required\n"
     "  --task T               must be the checkpoint's\n"
     "  --authorized FIELD=V,V the caller's current authorization; repeat per field\n"
     "  --authorized-unrestricted yes  the caller is authorized for everything\n",
     "charter scope-resume k1 CTX --principal alice --task 'desk refit' "
     "--authorized tenant=vendors,finance"},
    {"retrieval-trace", NULL, "charter retrieval-trace a12"},
    {"approvals",
     "  --run RUN          only this run's approvals\n"
     "  --state STATE      only pending, approved, denied, expired or refused ones\n",
     "charter approvals --state pending\n"
     "charter --json approvals --run RUN"},
    {"approve",
     "  --as ACTOR         the human the approval names (required): you decide for them\n"
     "  --reason TEXT      recorded with the decision\n",
     "charter approve ap-3f2a... --as human_cfo"},
    {"deny",
     "  --as ACTOR         the human the approval names (required): you decide for them\n"
     "  --reason TEXT      recorded with the decision\n",
     "charter deny ap-3f2a... --as human_cfo --reason 'not this quarter'"},
    {"call", NULL,
     "charter call /charter.v1.Health/Check\n"
     "charter call /charter.v1.Runs/GetRun '{\"runId\": \"RUN\"}'\n"
     "echo '{\"limit\": 5}' | charter call /charter.v1.Runs/ListRuns -"},
};

void cli_help_print_details(FILE *out, const char *name)
{
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        if (strcmp(entries[i].name, name) != 0)
            continue;
        if (entries[i].options != NULL)
            fprintf(out, "\noptions:\n%s", entries[i].options);
        fputs("\nexample:\n  ", out);
        for (const char *p = entries[i].example; *p != '\0'; p++) {
            fputc(*p, out);
            if (*p == '\n')
                fputs("  ", out);
        }
        fputc('\n', out);
        return;
    }
}

static bool token_given;

void cli_help_note_token(const char *token)
{
    token_given = token != NULL && token[0] != '\0';
}

const char *cli_help_auth_advice(void)
{
    return token_given
               ? "the token was refused (set CHARTER_TOKEN, or pass --token TOKEN, to charterd's "
                 "CHARTER_OPERATOR_TOKEN or CHARTER_VIEWER_TOKEN)"
               : "no token given (set CHARTER_TOKEN, or pass --token TOKEN: charterd's "
                 "CHARTER_OPERATOR_TOKEN or CHARTER_VIEWER_TOKEN)";
}
