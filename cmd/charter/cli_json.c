/*
 * cli_json.c - `charter --json` output through proto/protojson.c, the one converter between
 * charter.v1 messages and JSON (charterd's HTTP/JSON listener and `charter call` use it too).
 */
#include "cli_json.h"

#include <stdio.h>

#include "protojson.h"

int cli_json_print(const json_t *doc)
{
    if (doc == NULL) {
        fprintf(stderr, "charter: out of memory building the JSON output\n");
        return -1;
    }
    if (json_dumpf(doc, stdout, JSON_INDENT(2)) != 0 || fputc('\n', stdout) == EOF ||
        fflush(stdout) != 0) {
        fprintf(stderr, "charter: cannot write the output\n");
        return -1;
    }
    return 0;
}

int cli_json_print_message(const ProtobufCMessage *m)
{
    json_t *doc = NULL;
    char err[256];
    if (protojson_encode(m, NULL, &doc, err, sizeof err) != PROTOJSON_OK) {
        fprintf(stderr, "charter: cannot write the answer as JSON: %s\n", err);
        return -1;
    }
    int rv = cli_json_print(doc);
    json_decref(doc);
    return rv;
}
