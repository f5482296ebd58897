/*
 * cli_json.h - protobuf-c messages as JSON documents, for `charter --json`.
 *
 * The conversion is generic: it walks a message's ProtobufCMessageDescriptor, so every
 * message of charter.v1 (and any other protobuf-c message) converts the same way.
 */
#ifndef CHARTER_CLI_JSON_H
#define CHARTER_CLI_JSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

/* Converts m into a JSON object keyed by the proto field names, in declaration order, with
 * every field present (proto3 defaults included):
 *   strings as strings (invalid UTF-8 bytes replaced by U+FFFD), bytes as base64 text,
 *   32-bit numbers and 64-bit numbers up to INT64_MAX as JSON integers (larger uint64 values
 *   as decimal strings), floats and doubles as JSON reals ("NaN", "Infinity", "-Infinity" as
 *   strings), bools as true/false, enums by value name ("ALLOW"; a number when the value has
 *   no name), repeated fields as arrays, map fields as objects, nested messages as objects
 *   (null when unset); a oneof member or proto2 optional field appears only when set.
 * Returns 0 and *out (a new reference the caller decrefs), or -1 when m is NULL or memory ran
 * out (*out is then NULL). */
int cli_json_from_message(const ProtobufCMessage *m, json_t **out);

/* Base64 (RFC 4648, with padding) of len bytes of data as a NUL-terminated string the caller
 * frees, or NULL when memory ran out. */
char *cli_json_base64(const uint8_t *data, size_t len);

#endif
