/*
 * nulbyte.h - finds a NUL byte inside any string field of an encoded protobuf message.
 *
 * protobuf-c hands string fields over as NUL-terminated C strings, but the wire may carry a
 * NUL inside a string: "X\0one" would reach every handler as "X", so two different invocation
 * IDs would read as one. The request path refuses such a message instead of cutting it. The
 * check is generic: it walks the encoded bytes with the message's descriptor (nested messages
 * and map entries included), so every string field of every request is covered, present and
 * future.
 */
#ifndef CHARTER_NULBYTE_H
#define CHARTER_NULBYTE_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const ProtobufCFieldDescriptor *top; /* the top-level field whose bytes hold the NUL */
    size_t top_index;                    /* its element's position when repeated (maps too) */
    char path[160];                      /* e.g. "metadata[0].value", "invocation_id" */
} nulbyte_hit;

/* Looks through the len bytes at data, an encoded message of desc, for a string field (at any
 * depth) holding a byte 0. Call it on bytes protobuf-c has already unpacked with desc.
 * Returns 0 when there is none, 1 with *hit filled when there is one, -1 when the bytes are
 * not a well-formed encoding of desc (then nothing is said about NULs). */
int nulbyte_find(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                 nulbyte_hit *hit);

#endif
