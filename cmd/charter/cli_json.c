/*
 * cli_json.c - a generic protobuf-c to JSON converter for the CLI's --json output.
 *
 * It reads fields through the offsets in ProtobufCFieldDescriptor rather than per-message
 * code, so a field added to the proto shows up in the CLI's JSON without a change here.
 */
#include "cli_json.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *message_json(const ProtobufCMessage *m, int depth);

/* protobuf-c nests at most this deep when unpacking; a hand-built cycle stops here too. */
#define MAX_DEPTH 100

char *cli_json_base64(const uint8_t *data, size_t len)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (len > (SIZE_MAX - 1) / 4 * 3 - 3)
        return NULL;
    size_t n = (len + 2) / 3 * 4;
    char *out = malloc(n + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)data[i + 1] << 8;
        if (i + 2 < len)
            v |= data[i + 2];
        out[o++] = alphabet[(v >> 18) & 63];
        out[o++] = alphabet[(v >> 12) & 63];
        out[o++] = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? alphabet[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 when it is not one. */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
    size_t len;
    uint32_t cp;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) {
        len = 2;
        cp = s[0] & 0x1F;
    } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        len = 3;
        cp = s[0] & 0x0F;
    } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        len = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    /* Overlong forms, surrogates and values past U+10FFFF are not UTF-8. */
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* A JSON string of s; bytes that are not UTF-8 (and NUL never occurs) become U+FFFD. */
static json_t *string_json(const char *s)
{
    if (s == NULL)
        return json_string("");
    json_t *j = json_string(s);
    if (j != NULL)
        return j;
    size_t n = strlen(s);
    if (n > (SIZE_MAX - 1) / 3)
        return NULL;
    char *clean = malloc(n * 3 + 1);
    if (clean == NULL)
        return NULL;
    size_t o = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_sequence(u + i, n - i);
        if (len == 0) {
            memcpy(clean + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(clean + o, u + i, len);
            o += len;
            i += len;
        }
    }
    clean[o] = '\0';
    j = json_string(clean);
    free(clean);
    return j;
}

static json_t *real_json(double v)
{
    if (isnan(v))
        return json_string("NaN");
    if (isinf(v))
        return json_string(v > 0 ? "Infinity" : "-Infinity");
    return json_real(v);
}

static json_t *uint64_json(uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX)
        return json_integer((json_int_t)v);
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
    return json_string(buf);
}

/* The size of one element of a repeated field of type t. */
static size_t element_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return sizeof(int32_t);
    case PROTOBUF_C_TYPE_FLOAT:
        return sizeof(float);
    case PROTOBUF_C_TYPE_ENUM:
        return sizeof(int);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return sizeof(int64_t);
    case PROTOBUF_C_TYPE_DOUBLE:
        return sizeof(double);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    }
    return 0;
}

/* One value of field f stored at p. */
static json_t *value_json(const ProtobufCFieldDescriptor *f, const void *p, int depth)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        return json_integer(*(const int32_t *)p);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return json_integer(*(const uint32_t *)p);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        return json_integer(*(const int64_t *)p);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return uint64_json(*(const uint64_t *)p);
    case PROTOBUF_C_TYPE_FLOAT:
        return real_json(*(const float *)p);
    case PROTOBUF_C_TYPE_DOUBLE:
        return real_json(*(const double *)p);
    case PROTOBUF_C_TYPE_BOOL:
        return json_boolean(*(const protobuf_c_boolean *)p);
    case PROTOBUF_C_TYPE_ENUM: {
        int v = *(const int *)p;
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, v);
        return ev != NULL ? json_string(ev->name) : json_integer(v);
    }
    case PROTOBUF_C_TYPE_STRING:
        return string_json(*(char *const *)p);
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        char *text = cli_json_base64(b->data, b->len);
        if (text == NULL)
            return NULL;
        json_t *j = json_string(text);
        free(text);
        return j;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
        return sub != NULL ? message_json(sub, depth + 1) : json_null();
    }
    }
    return NULL;
}

/* protoc-c gives a map<K,V> field as a repeated message "...Entry" with fields key = 1 and
 * value = 2. */
static bool is_map_entry(const ProtobufCMessageDescriptor *d)
{
    size_t n = strlen(d->name);
    return n > 5 && strcmp(d->name + n - 5, "Entry") == 0 && d->n_fields == 2 &&
           strcmp(d->fields[0].name, "key") == 0 && d->fields[0].id == 1 &&
           strcmp(d->fields[1].name, "value") == 0 && d->fields[1].id == 2;
}

/* A map field's entries as one JSON object; keys become text. */
static json_t *map_json(const ProtobufCFieldDescriptor *f, ProtobufCMessage *const *entries,
                        size_t n, int depth)
{
    const ProtobufCMessageDescriptor *d = f->descriptor;
    const ProtobufCFieldDescriptor *kf = &d->fields[0], *vf = &d->fields[1];
    json_t *obj = json_object();
    if (obj == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const char *base = (const char *)entries[i];
        json_t *key = value_json(kf, base + kf->offset, depth + 1);
        json_t *val = value_json(vf, base + vf->offset, depth + 1);
        const char *k = NULL;
        char buf[64];
        if (key != NULL && json_is_string(key)) {
            k = json_string_value(key);
        } else if (key != NULL && json_is_integer(key)) {
            snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(key));
            k = buf;
        } else if (key != NULL && json_is_boolean(key)) {
            k = json_is_true(key) ? "true" : "false";
        }
        if (k == NULL || val == NULL || json_object_set_new(obj, k, val) != 0) {
            if (k == NULL || val == NULL)
                json_decref(val);
            json_decref(key);
            json_decref(obj);
            return NULL;
        }
        json_decref(key);
    }
    return obj;
}

/* Whether an optional field (a oneof member or a proto2 optional) holds a value. */
static bool optional_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    const char *base = (const char *)m;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING)
        return *(const void *const *)(base + f->offset) != NULL;
    return *(const protobuf_c_boolean *)(base + f->quantifier_offset) != 0;
}

static json_t *field_json(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, int depth)
{
    const char *base = (const char *)m;
    if (f->label != PROTOBUF_C_LABEL_REPEATED)
        return value_json(f, base + f->offset, depth);

    size_t n = *(const size_t *)(base + f->quantifier_offset);
    const char *items = *(const char *const *)(base + f->offset);
    if (f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor))
        return map_json(f, (ProtobufCMessage *const *)items, n, depth);
    json_t *arr = json_array();
    if (arr == NULL)
        return NULL;
    size_t size = element_size(f->type);
    for (size_t i = 0; i < n; i++) {
        json_t *v = value_json(f, items + i * size, depth);
        if (v == NULL || json_array_append_new(arr, v) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static json_t *message_json(const ProtobufCMessage *m, int depth)
{
    if (m == NULL || m->descriptor == NULL || depth > MAX_DEPTH)
        return NULL;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    json_t *obj = json_object();
    if (obj == NULL)
        return NULL;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->label == PROTOBUF_C_LABEL_OPTIONAL && !optional_present(m, f))
            continue;
        json_t *v = field_json(m, f, depth);
        if (v == NULL || json_object_set_new(obj, f->name, v) != 0) {
            json_decref(obj);
            return NULL;
        }
    }
    return obj;
}

int cli_json_from_message(const ProtobufCMessage *m, json_t **out)
{
    if (out == NULL)
        return -1;
    *out = message_json(m, 0);
    return *out != NULL ? 0 : -1;
}
