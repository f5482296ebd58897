/*
 * cli_json.h - `charter --json`: answers in the proto3 JSON mapping, as HTTP/JSON gives them.
 *
 * A response message is converted by proto/protojson.c, the converter charterd's HTTP/JSON
 * listener and `charter call` use, so the CLI, curl and `charter call` print one shape:
 * lowerCamelCase names, fields at their default left out, 64-bit integers as strings, enums
 * by name, bytes as base64 (docs/cli.md, "JSON output"). The CLI's own reports (verify-receipt,
 * workflow validate|test|rehearse) are documents of the same style: lowerCamelCase keys.
 */
#ifndef CHARTER_CLI_JSON_H
#define CHARTER_CLI_JSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

/* Writes m on stdout as one JSON document (indented by 2, then a newline) in the proto3 JSON
 * mapping. Returns 0, or -1 with one line on stderr naming why (a string that is not UTF-8,
 * nesting past the converter's depth limit, out of memory, a write error). */
int cli_json_print_message(const ProtobufCMessage *m);

/* Writes doc (borrowed; NULL reads as out of memory) on stdout as one JSON document, indented
 * by 2, then a newline. Returns 0, or -1 with one line on stderr. */
int cli_json_print(const json_t *doc);

#endif
