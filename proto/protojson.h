/*
 * protojson.h - the proto3 JSON mapping of any protobuf-c message, read from its descriptors.
 *
 * HTTP/JSON callers of charterd and `charter call` speak JSON; the server and libcharter speak
 * protobuf. This module converts between the two for every message of proto/charter.proto (or
 * any other protobuf-c message) by walking ProtobufCMessageDescriptor and
 * ProtobufCFieldDescriptor, so no message has a converter of its own. The rules are proto3's
 * JSON mapping: lowerCamelCase names (the original field name is accepted on input), enums by
 * name (numbers accepted), 64-bit integers as strings (numbers accepted), bytes as standard
 * base64 (URL-safe accepted), repeated fields as arrays, map fields (protobuf-c's repeated
 * XxxEntry messages) as objects, oneofs, null meaning the default, defaults omitted on output.
 * Well-known types (Timestamp, Any, ...) get no special form.
 */
#ifndef CHARTER_PROTOJSON_H
#define CHARTER_PROTOJSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

/* Status codes of this module (0 or negative). */
enum {
    PROTOJSON_OK = 0,
    PROTOJSON_EINVAL = -1, /* the JSON is not a valid form of the message: err names the path */
    PROTOJSON_ENOMEM = -2, /* an allocation failed (or the caller's allocator refused) */
    PROTOJSON_ELIMIT = -3, /* the input is larger or nested deeper than the limits allow */
};

/* Default limits: JSON text of one message, and nesting of messages, maps and arrays. */
#define PROTOJSON_DEFAULT_MAX_BYTES ((size_t)4 * 1024 * 1024)
#define PROTOJSON_DEFAULT_MAX_DEPTH 32

typedef struct {
    size_t max_bytes;   /* JSON text accepted by protojson_decode, bytes (0: default) */
    unsigned max_depth; /* nesting of objects and arrays accepted or written (0: default) */
} protojson_limits;

/* Reads the JSON text json (len bytes, need not be NUL-terminated) as a message of type desc.
 * Every part of the message (the message itself, strings, bytes, arrays, submessages) is
 * allocated from alloc (NULL: protobuf-c's default allocator, malloc), exactly as
 * protobuf_c_message_unpack would, so the caller frees *out with
 * protobuf_c_message_free_unpacked(*out, alloc). limits may be NULL for the defaults.
 *
 * Returns PROTOJSON_OK and *out; or PROTOJSON_EINVAL (not JSON, not an object, unknown field,
 * wrong type, number out of range, bad base64, unknown enum name, a field or oneof given twice,
 * duplicate object key), PROTOJSON_ELIMIT (larger than max_bytes or deeper than max_depth) or
 * PROTOJSON_ENOMEM; then *out is NULL and err (errlen bytes) holds one line naming the field
 * path, e.g. "payloadIds[2]: expected a string, got a number". */
int protojson_decode(const ProtobufCMessageDescriptor *desc, const char *json, size_t len,
                     ProtobufCAllocator *alloc, const protojson_limits *limits,
                     ProtobufCMessage **out, char *err, size_t errlen);

/* As protojson_decode, from a jansson value already parsed (value is borrowed). Duplicate keys
 * of an object are the parser's to refuse (JSON_REJECT_DUPLICATES). */
int protojson_decode_value(const ProtobufCMessageDescriptor *desc, const json_t *value,
                           ProtobufCAllocator *alloc, const protojson_limits *limits,
                           ProtobufCMessage **out, char *err, size_t errlen);

/* Writes msg as a JSON object in the proto3 mapping: fields by lowerCamelCase name, fields at
 * their default omitted (a set oneof member or proto3 optional field is written even at its
 * default), NaN and infinities as "NaN", "Infinity", "-Infinity". *out is a new reference the
 * caller releases with json_decref. Returns PROTOJSON_OK, PROTOJSON_ELIMIT (nested deeper than
 * max_depth), PROTOJSON_EINVAL (msg is not a valid protobuf-c message) or PROTOJSON_ENOMEM,
 * with a reason in err. */
int protojson_encode(const ProtobufCMessage *msg, const protojson_limits *limits, json_t **out,
                     char *err, size_t errlen);

/* As protojson_encode, as compact JSON text: *out is malloc'd, NUL-terminated, freed by the
 * caller with free(). */
int protojson_encode_text(const ProtobufCMessage *msg, const protojson_limits *limits, char **out,
                          char *err, size_t errlen);

/* The proto3 JSON name of a field name: underscores dropped, the letter after each one upper
 * case ("context_id" -> "contextId"). Writes at most n bytes with the NUL; returns 0, or -1
 * when the name does not fit. */
int protojson_json_name(const char *field_name, char *out, size_t n);

#endif
