/*
 * nulbyte.c - a NUL byte inside a string field of an encoded message (see nulbyte.h).
 *
 * The walk reads only tags and length prefixes, the framing protobuf-c has already accepted
 * when it unpacked the same bytes; field numbers and types come from the generated descriptor
 * (protobuf_c_message_descriptor_get_field), so no schema is written out by hand here.
 */
#include "core/nulbyte.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Nesting deeper than any charter.v1 message; a deeper encoding is not ours. */
#define NULBYTE_MAX_DEPTH 32
/* Fields whose element positions are counted (every charter.v1 message has fewer). */
#define NULBYTE_MAX_FIELDS 64

/* Reads a varint at *p (below end). Returns 0 and advances *p, or -1. */
static int nulbyte_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

static int nulbyte_walk(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                        unsigned depth, nulbyte_hit *hit, char *path, size_t path_len)
{
    if (depth > NULBYTE_MAX_DEPTH) {
        return -1;
    }
    if (data == NULL || len == 0) {
        return 0; /* an empty message holds no string (NULL + 0 is undefined in C) */
    }
    size_t seen[NULBYTE_MAX_FIELDS];
    memset(seen, 0, sizeof seen);
    const uint8_t *p = data;
    const uint8_t *end = data + len;
    while (p < end) {
        uint64_t key;
        if (nulbyte_varint(&p, end, &key) != 0) {
            return -1;
        }
        uint32_t number = (uint32_t)(key >> 3);
        switch ((ProtobufCWireType)(key & 7)) {
        case PROTOBUF_C_WIRE_TYPE_VARINT: {
            uint64_t ignored;
            if (nulbyte_varint(&p, end, &ignored) != 0) {
                return -1;
            }
            continue;
        }
        case PROTOBUF_C_WIRE_TYPE_64BIT:
            if ((size_t)(end - p) < 8) {
                return -1;
            }
            p += 8;
            continue;
        case PROTOBUF_C_WIRE_TYPE_32BIT:
            if ((size_t)(end - p) < 4) {
                return -1;
            }
            p += 4;
            continue;
        case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED:
            break;
        default:
            return -1; /* groups: not in proto3, and protobuf-c does not read them either */
        }
        uint64_t n;
        if (nulbyte_varint(&p, end, &n) != 0 || n > (uint64_t)(end - p)) {
            return -1;
        }
        const uint8_t *value = p;
        p += n;
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(desc, number);
        if (f == NULL) {
            continue; /* an unknown field: protobuf-c keeps its bytes, no handler reads them */
        }
        size_t fi = (size_t)(f - desc->fields);
        size_t index = fi < NULBYTE_MAX_FIELDS ? seen[fi]++ : 0;
        bool repeated = f->label == PROTOBUF_C_LABEL_REPEATED;
        size_t here = path_len;
        int w = repeated ? snprintf(path + here, sizeof hit->path - here, "%s%s[%zu]",
                                    here > 0 ? "." : "", f->name, index)
                         : snprintf(path + here, sizeof hit->path - here, "%s%s",
                                    here > 0 ? "." : "", f->name);
        size_t next = (w > 0 && (size_t)w < sizeof hit->path - here) ? here + (size_t)w : here;
        if (f->type == PROTOBUF_C_TYPE_STRING) {
            if (memchr(value, 0, (size_t)n) != NULL) {
                if (depth == 0) {
                    hit->top = f;
                    hit->top_index = index;
                }
                return 1;
            }
        } else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
            int rc = nulbyte_walk(f->descriptor, value, (size_t)n, depth + 1, hit, path, next);
            if (rc != 0) {
                if (rc == 1 && depth == 0) {
                    hit->top = f;
                    hit->top_index = index;
                }
                return rc;
            }
        }
        path[here] = '\0';
    }
    return 0;
}

int nulbyte_find(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                 nulbyte_hit *hit)
{
    memset(hit, 0, sizeof *hit);
    if (desc == NULL || (data == NULL && len > 0)) {
        return -1;
    }
    return nulbyte_walk(desc, data, len, 0, hit, hit->path, 0);
}
