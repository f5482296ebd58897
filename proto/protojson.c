/*
 * protojson.c - the proto3 JSON mapping over protobuf-c descriptors (see protojson.h).
 *
 * Decoding builds the message exactly as protobuf_c_message_unpack would (init from the
 * descriptor, every string, byte string, array and submessage from the caller's allocator, the
 * oneof case set before its member), so protobuf_c_message_free_unpacked releases a message in
 * any state this code leaves it in: on an error half way the partial message is freed that way.
 * JSON text is parsed by jansson, base64 by OpenSSL.
 */
#include "protojson.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest field name handled; protoc allows longer, charter.v1 has none near it. */
#define PJ_NAME_MAX 128
#define PJ_PATH_MAX 256

typedef struct {
    ProtobufCAllocator *alloc;
    unsigned max_depth;
    char path[PJ_PATH_MAX];
    size_t path_len;
    char *err;
    size_t errlen;
} pj_ctx;

static void *pj_system_alloc(void *data, size_t size)
{
    (void)data;
    return malloc(size);
}

static void pj_system_free(void *data, void *ptr)
{
    (void)data;
    free(ptr);
}

/* The same as protobuf-c's default allocator, which it does not export. */
static ProtobufCAllocator pj_system_allocator = {pj_system_alloc, pj_system_free, NULL};

/* --- errors and the field path ------------------------------------------------------------ */

static int pj_fail(pj_ctx *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int pj_fail(pj_ctx *c, int status, const char *fmt, ...)
{
    if (c->err == NULL || c->errlen == 0) {
        return status;
    }
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->path_len > 0) {
        snprintf(c->err, c->errlen, "%s: %s", c->path, msg);
    } else {
        snprintf(c->err, c->errlen, "%s", msg);
    }
    return status;
}

/* Appends ".name" (or "name" at the root), "[i]" or "[\"key\"]" to the path; returns the length
 * to restore with pj_path_pop. A path too long for the buffer ends in "...". */
static size_t pj_path_push(pj_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static size_t pj_path_push(pj_ctx *c, const char *fmt, ...)
{
    size_t old = c->path_len;
    if (old >= sizeof c->path - 4) {
        return old;
    }
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(c->path + old, sizeof c->path - old, fmt, ap);
    va_end(ap);
    if (w < 0) {
        c->path[old] = '\0';
        return old;
    }
    if ((size_t)w >= sizeof c->path - old) {
        memcpy(c->path + sizeof c->path - 4, "...", 4);
        c->path_len = sizeof c->path - 1;
    } else {
        c->path_len = old + (size_t)w;
    }
    return old;
}

static void pj_path_pop(pj_ctx *c, size_t old)
{
    c->path_len = old;
    c->path[old] = '\0';
}

static size_t pj_path_field(pj_ctx *c, const char *json_name)
{
    return c->path_len == 0 ? pj_path_push(c, "%s", json_name) : pj_path_push(c, ".%s", json_name);
}

static const char *pj_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

static void *pj_alloc(pj_ctx *c, size_t size)
{
    void *p = c->alloc->alloc(c->alloc->allocator_data, size > 0 ? size : 1);
    if (p == NULL) {
        pj_fail(c, PROTOJSON_ENOMEM, "out of memory (%zu bytes)", size);
    }
    return p;
}

/* --- names -------------------------------------------------------------------------------- */

int protojson_json_name(const char *field_name, char *out, size_t n)
{
    size_t j = 0;
    bool upper = false;
    for (const char *p = field_name; *p != '\0'; p++) {
        if (*p == '_') {
            upper = true;
            continue;
        }
        if (j + 1 >= n) {
            return -1;
        }
        char ch = *p;
        if (upper && ch >= 'a' && ch <= 'z') {
            ch = (char)(ch - 'a' + 'A');
        }
        upper = false;
        out[j++] = ch;
    }
    if (j >= n) {
        return -1;
    }
    out[j] = '\0';
    return 0;
}

/* A map<K,V> field is, in protobuf-c, a repeated field of a nested message protoc names
 * "<FieldName>Entry" with fields key = 1 and value = 2 (protoc's MapEntryName); the descriptor
 * keeps no map flag, so that shape is what marks one. */
static bool pj_is_map(const ProtobufCFieldDescriptor *f)
{
    if (f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE) {
        return false;
    }
    const ProtobufCMessageDescriptor *e = f->descriptor;
    if (e == NULL || e->n_fields != 2) {
        return false;
    }
    const ProtobufCFieldDescriptor *k = protobuf_c_message_descriptor_get_field(e, 1);
    const ProtobufCFieldDescriptor *v = protobuf_c_message_descriptor_get_field(e, 2);
    if (k == NULL || v == NULL || strcmp(k->name, "key") != 0 || strcmp(v->name, "value") != 0) {
        return false;
    }
    char want[PJ_NAME_MAX + 8];
    size_t j = 0;
    bool upper = true;
    for (const char *p = f->name; *p != '\0' && j + 7 < sizeof want; p++) {
        if (*p == '_') {
            upper = true;
            continue;
        }
        char ch = *p;
        if (upper && ch >= 'a' && ch <= 'z') {
            ch = (char)(ch - 'a' + 'A');
        }
        upper = false;
        want[j++] = ch;
    }
    memcpy(want + j, "Entry", 6);
    return strcmp(e->short_name, want) == 0;
}

static const char *pj_field_json_name(const ProtobufCFieldDescriptor *f, char *buf, size_t n)
{
    if (protojson_json_name(f->name, buf, n) != 0) {
        return f->name;
    }
    return buf;
}

/* The field named key (its JSON name or its proto name), or -1. */
static int pj_find_field(const ProtobufCMessageDescriptor *d, const char *key)
{
    char jn[PJ_NAME_MAX];
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (strcmp(pj_field_json_name(f, jn, sizeof jn), key) == 0 || strcmp(f->name, key) == 0) {
            return (int)i;
        }
    }
    return -1;
}

/* --- JSON -> message ---------------------------------------------------------------------- */

static int pj_decode_message(pj_ctx *c, const ProtobufCMessageDescriptor *d, const json_t *v,
                             unsigned depth, ProtobufCMessage **out);

/* Parses text as a whole decimal integer, signed or not. Returns 0 or -1. */
static int pj_parse_int_text(const char *s, bool is_signed, int64_t *i, uint64_t *u)
{
    if (*s == '\0' || (*s != '-' && (*s < '0' || *s > '9'))) {
        return -1;
    }
    char *end = NULL;
    errno = 0;
    if (is_signed) {
        long long x = strtoll(s, &end, 10);
        if (errno != 0 || *end != '\0') {
            return -1;
        }
        *i = x;
    } else {
        if (*s == '-') {
            return -1;
        }
        unsigned long long x = strtoull(s, &end, 10);
        if (errno != 0 || *end != '\0') {
            return -1;
        }
        *u = x;
    }
    return 0;
}

/* An integer of [min, max] (signed) or [0, umax] (unsigned) from a JSON number (an integral
 * real too) or a decimal string. */
static int pj_integer(pj_ctx *c, const json_t *v, bool is_signed, int64_t min, int64_t max,
                      uint64_t umax, const char *type, int64_t *i, uint64_t *u)
{
    int64_t si = 0;
    uint64_t ui = 0;
    bool neg = false;
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (x < 0) {
            neg = true;
            si = (int64_t)x;
        } else {
            si = (int64_t)x;
            ui = (uint64_t)x;
        }
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d != floor(d)) {
            return pj_fail(c, PROTOJSON_EINVAL, "%s must be a whole number, got %g", type, d);
        }
        if (d < -9223372036854775808.0 || d >= 18446744073709551616.0) {
            return pj_fail(c, PROTOJSON_EINVAL, "%g is out of range for %s", d, type);
        }
        if (d < 0) {
            neg = true;
            si = (int64_t)d;
        } else {
            ui = (uint64_t)d;
            si = d < 9223372036854775808.0 ? (int64_t)d : INT64_MAX;
        }
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (pj_parse_int_text(s, is_signed, &si, &ui) != 0) {
            return pj_fail(c, PROTOJSON_EINVAL, "\"%.40s\" is not a %s", s, type);
        }
        if (is_signed) {
            neg = si < 0;
            ui = neg ? 0 : (uint64_t)si;
        } else {
            si = ui > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)ui;
        }
    } else {
        return pj_fail(c, PROTOJSON_EINVAL, "expected a %s (number or string), got %s", type,
                       pj_kind(v));
    }
    if (is_signed) {
        if (!neg && ui > (uint64_t)INT64_MAX) {
            return pj_fail(c, PROTOJSON_EINVAL, "out of range for %s", type);
        }
        if (si < min || si > max) {
            return pj_fail(c, PROTOJSON_EINVAL, "%" PRId64 " is out of range for %s", si, type);
        }
        *i = si;
    } else {
        if (neg || ui > umax) {
            return pj_fail(c, PROTOJSON_EINVAL, "%s%" PRIu64 " is out of range for %s",
                           neg ? "-" : "", neg ? (uint64_t)(-(si + 1)) + 1 : ui, type);
        }
        *u = ui;
    }
    return PROTOJSON_OK;
}

static int pj_floating(pj_ctx *c, const json_t *v, bool is_float, double *out)
{
    const char *type = is_float ? "float" : "double";
    double d;
    if (json_is_number(v)) {
        d = json_number_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "NaN") == 0) {
            *out = NAN;
            return PROTOJSON_OK;
        }
        if (strcmp(s, "Infinity") == 0) {
            *out = INFINITY;
            return PROTOJSON_OK;
        }
        if (strcmp(s, "-Infinity") == 0) {
            *out = -INFINITY;
            return PROTOJSON_OK;
        }
        char *end = NULL;
        errno = 0;
        d = strtod(s, &end);
        if (*s == '\0' || *end != '\0' || errno != 0 || !isfinite(d) ||
            (*s != '-' && (*s < '0' || *s > '9'))) {
            return pj_fail(c, PROTOJSON_EINVAL, "\"%.40s\" is not a %s", s, type);
        }
    } else {
        return pj_fail(c, PROTOJSON_EINVAL, "expected a %s, got %s", type, pj_kind(v));
    }
    if (is_float && isfinite(d) && fabs(d) > FLT_MAX) {
        return pj_fail(c, PROTOJSON_EINVAL, "%g is out of range for float", d);
    }
    *out = d;
    return PROTOJSON_OK;
}

/* Standard or URL-safe base64, padded or not, into bytes from the allocator. Whitespace and
 * any character outside the two alphabets is refused (OpenSSL's decoder would skip some). */
static int pj_base64(pj_ctx *c, const char *s, size_t n, ProtobufCBinaryData *out)
{
    out->data = NULL;
    out->len = 0;
    if (n == 0) {
        return PROTOJSON_OK;
    }
    if (n > (size_t)INT32_MAX - 4) {
        return pj_fail(c, PROTOJSON_ELIMIT, "base64 text of %zu bytes is too long", n);
    }
    size_t body = n;
    while (body > 0 && s[body - 1] == '=') {
        body--;
    }
    if (n - body > 2 || body % 4 == 1 || (n != body && n % 4 != 0)) {
        return pj_fail(c, PROTOJSON_EINVAL, "bad base64: wrong length or padding");
    }
    size_t padded = (body + 3) / 4 * 4;
    unsigned char *tmp = malloc(padded + 1);
    if (tmp == NULL) {
        return pj_fail(c, PROTOJSON_ENOMEM, "out of memory decoding base64");
    }
    for (size_t i = 0; i < body; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '-') {
            ch = '+';
        } else if (ch == '_') {
            ch = '/';
        } else if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                     (ch >= '0' && ch <= '9') || ch == '+' || ch == '/')) {
            free(tmp);
            return pj_fail(c, PROTOJSON_EINVAL, "bad base64: character %zu is not base64", i);
        }
        tmp[i] = ch;
    }
    for (size_t i = body; i < padded; i++) {
        tmp[i] = '=';
    }
    tmp[padded] = '\0';
    size_t cap = padded / 4 * 3;
    uint8_t *data = pj_alloc(c, cap);
    if (data == NULL) {
        free(tmp);
        return PROTOJSON_ENOMEM;
    }
    int got = EVP_DecodeBlock(data, tmp, (int)padded);
    free(tmp);
    if (got < 0 || (size_t)got != cap) {
        c->alloc->free(c->alloc->allocator_data, data);
        return pj_fail(c, PROTOJSON_EINVAL, "bad base64");
    }
    out->data = data;
    out->len = cap - (padded - body);
    return PROTOJSON_OK;
}

/* One value of field f's type (a scalar, a string, bytes or a message) into dst. */
static int pj_decode_value(pj_ctx *c, const ProtobufCFieldDescriptor *f, const json_t *v,
                           unsigned depth, void *dst)
{
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    int rc;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        rc = pj_integer(c, v, true, INT32_MIN, INT32_MAX, 0, "int32", &i, &u);
        if (rc == PROTOJSON_OK) {
            *(int32_t *)dst = (int32_t)i;
        }
        return rc;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        rc = pj_integer(c, v, false, 0, 0, UINT32_MAX, "uint32", &i, &u);
        if (rc == PROTOJSON_OK) {
            *(uint32_t *)dst = (uint32_t)u;
        }
        return rc;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        rc = pj_integer(c, v, true, INT64_MIN, INT64_MAX, 0, "int64", &i, &u);
        if (rc == PROTOJSON_OK) {
            *(int64_t *)dst = i;
        }
        return rc;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        rc = pj_integer(c, v, false, 0, 0, UINT64_MAX, "uint64", &i, &u);
        if (rc == PROTOJSON_OK) {
            *(uint64_t *)dst = u;
        }
        return rc;
    case PROTOBUF_C_TYPE_FLOAT:
        rc = pj_floating(c, v, true, &d);
        if (rc == PROTOJSON_OK) {
            *(float *)dst = (float)d;
        }
        return rc;
    case PROTOBUF_C_TYPE_DOUBLE:
        rc = pj_floating(c, v, false, &d);
        if (rc == PROTOJSON_OK) {
            *(double *)dst = d;
        }
        return rc;
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v)) {
            return pj_fail(c, PROTOJSON_EINVAL, "expected a boolean, got %s", pj_kind(v));
        }
        *(protobuf_c_boolean *)dst = json_is_true(v);
        return PROTOJSON_OK;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumDescriptor *ed = f->descriptor;
        if (json_is_string(v)) {
            const ProtobufCEnumValue *ev =
                protobuf_c_enum_descriptor_get_value_by_name(ed, json_string_value(v));
            if (ev == NULL) {
                return pj_fail(c, PROTOJSON_EINVAL, "\"%.40s\" is not a value of enum %s",
                               json_string_value(v), ed->name);
            }
            *(int *)dst = ev->value;
            return PROTOJSON_OK;
        }
        if (!json_is_number(v)) {
            return pj_fail(c, PROTOJSON_EINVAL, "expected a name of enum %s, got %s", ed->name,
                           pj_kind(v));
        }
        rc = pj_integer(c, v, true, INT32_MIN, INT32_MAX, 0, "enum number", &i, &u);
        if (rc == PROTOJSON_OK) {
            *(int *)dst = (int)i;
        }
        return rc;
    }
    case PROTOBUF_C_TYPE_STRING: {
        if (!json_is_string(v)) {
            return pj_fail(c, PROTOJSON_EINVAL, "expected a string, got %s", pj_kind(v));
        }
        size_t n = json_string_length(v);
        const char *s = json_string_value(v);
        if (memchr(s, '\0', n) != NULL) {
            return pj_fail(c, PROTOJSON_EINVAL, "the string holds a NUL character");
        }
        char *copy = pj_alloc(c, n + 1);
        if (copy == NULL) {
            return PROTOJSON_ENOMEM;
        }
        memcpy(copy, s, n + 1);
        *(char **)dst = copy;
        return PROTOJSON_OK;
    }
    case PROTOBUF_C_TYPE_BYTES:
        if (!json_is_string(v)) {
            return pj_fail(c, PROTOJSON_EINVAL, "expected base64 text, got %s", pj_kind(v));
        }
        return pj_base64(c, json_string_value(v), json_string_length(v),
                         (ProtobufCBinaryData *)dst);
    case PROTOBUF_C_TYPE_MESSAGE:
        return pj_decode_message(c, f->descriptor, v, depth + 1, (ProtobufCMessage **)dst);
    }
    return pj_fail(c, PROTOJSON_EINVAL, "field type %d is not supported", (int)f->type);
}

static size_t pj_value_size(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_ENUM:
        return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    }
    return 0;
}

/* A map key given as JSON object key text, parsed as the key field's type into entry. */
static int pj_decode_map_key(pj_ctx *c, const ProtobufCFieldDescriptor *kf, const char *key,
                             ProtobufCMessage *entry)
{
    void *dst = (char *)entry + kf->offset;
    if (kf->type == PROTOBUF_C_TYPE_BOOL) {
        if (strcmp(key, "true") != 0 && strcmp(key, "false") != 0) {
            return pj_fail(c, PROTOJSON_EINVAL, "map key must be \"true\" or \"false\"");
        }
        *(protobuf_c_boolean *)dst = strcmp(key, "true") == 0;
        return PROTOJSON_OK;
    }
    json_t *ks = json_string(key);
    if (ks == NULL) {
        return pj_fail(c, PROTOJSON_ENOMEM, "out of memory");
    }
    int rc = pj_decode_value(c, kf, ks, 0, dst);
    json_decref(ks);
    return rc;
}

static int pj_decode_map(pj_ctx *c, const ProtobufCFieldDescriptor *f, ProtobufCMessage *m,
                         const json_t *v, unsigned depth)
{
    if (!json_is_object(v)) {
        return pj_fail(c, PROTOJSON_EINVAL, "expected an object (a map), got %s", pj_kind(v));
    }
    if (depth + 1 > c->max_depth) {
        return pj_fail(c, PROTOJSON_ELIMIT, "nested deeper than %u levels", c->max_depth);
    }
    const ProtobufCMessageDescriptor *ed = f->descriptor;
    const ProtobufCFieldDescriptor *kf = protobuf_c_message_descriptor_get_field(ed, 1);
    const ProtobufCFieldDescriptor *vf = protobuf_c_message_descriptor_get_field(ed, 2);
    size_t n = json_object_size(v);
    size_t *count = (size_t *)((char *)m + f->quantifier_offset);
    ProtobufCMessage ***arr = (ProtobufCMessage ***)((char *)m + f->offset);
    if (n == 0) {
        return PROTOJSON_OK;
    }
    *arr = pj_alloc(c, n * sizeof(ProtobufCMessage *));
    if (*arr == NULL) {
        return PROTOJSON_ENOMEM;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        size_t old = pj_path_push(c, "[\"%.40s\"]", key);
        ProtobufCMessage *entry = pj_alloc(c, ed->sizeof_message);
        if (entry == NULL) {
            return PROTOJSON_ENOMEM;
        }
        protobuf_c_message_init(ed, entry);
        (*arr)[(*count)++] = entry;
        int rc = pj_decode_map_key(c, kf, key, entry);
        if (rc != PROTOJSON_OK) {
            return rc;
        }
        if (json_is_null(val)) {
            return pj_fail(c, PROTOJSON_EINVAL, "a map value may not be null");
        }
        rc = pj_decode_value(c, vf, val, depth + 1, (char *)entry + vf->offset);
        if (rc != PROTOJSON_OK) {
            return rc;
        }
        pj_path_pop(c, old);
    }
    return PROTOJSON_OK;
}

static int pj_decode_repeated(pj_ctx *c, const ProtobufCFieldDescriptor *f, ProtobufCMessage *m,
                              const json_t *v, unsigned depth)
{
    if (!json_is_array(v)) {
        return pj_fail(c, PROTOJSON_EINVAL, "expected an array, got %s", pj_kind(v));
    }
    if (depth + 1 > c->max_depth) {
        return pj_fail(c, PROTOJSON_ELIMIT, "nested deeper than %u levels", c->max_depth);
    }
    size_t n = json_array_size(v);
    size_t size = pj_value_size(f);
    size_t *count = (size_t *)((char *)m + f->quantifier_offset);
    void **arr = (void **)((char *)m + f->offset);
    if (n == 0) {
        return PROTOJSON_OK;
    }
    if (n > SIZE_MAX / size) {
        return pj_fail(c, PROTOJSON_ELIMIT, "array too long");
    }
    *arr = pj_alloc(c, n * size);
    if (*arr == NULL) {
        return PROTOJSON_ENOMEM;
    }
    memset(*arr, 0, n * size);
    for (size_t i = 0; i < n; i++) {
        size_t old = pj_path_push(c, "[%zu]", i);
        const json_t *e = json_array_get(v, i);
        if (json_is_null(e)) {
            return pj_fail(c, PROTOJSON_EINVAL, "an array element may not be null");
        }
        /* Counted before decoding so a failure frees what the element holds so far. */
        (*count)++;
        int rc = pj_decode_value(c, f, e, depth + 1, (char *)*arr + i * size);
        if (rc != PROTOJSON_OK) {
            return rc;
        }
        pj_path_pop(c, old);
    }
    return PROTOJSON_OK;
}

/* Field f of m from v (not null). */
static int pj_decode_field(pj_ctx *c, const ProtobufCFieldDescriptor *f, ProtobufCMessage *m,
                           const json_t *v, unsigned depth)
{
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        return pj_is_map(f) ? pj_decode_map(c, f, m, v, depth)
                            : pj_decode_repeated(c, f, m, v, depth);
    }
    void *dst = (char *)m + f->offset;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        uint32_t *which = (uint32_t *)((char *)m + f->quantifier_offset);
        if (*which != 0) {
            const ProtobufCFieldDescriptor *other =
                protobuf_c_message_descriptor_get_field(m->descriptor, *which);
            return pj_fail(c, PROTOJSON_EINVAL, "another member of its oneof (%s) is set already",
                           other != NULL ? other->name : "?");
        }
        /* The members share storage: set the case first so a failure frees the right one. */
        memset(dst, 0, pj_value_size(f));
        *which = f->id;
    } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
               f->type != PROTOBUF_C_TYPE_MESSAGE) {
        *(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = 1;
    }
    if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE) {
        /* Never leave a default (static) pointer where a failed decode would be freed. */
        void *prev = *(void **)dst;
        *(void **)dst = NULL;
        int rc = pj_decode_value(c, f, v, depth, dst);
        if (rc != PROTOJSON_OK && *(void **)dst == NULL &&
            !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) {
            *(void **)dst = prev;
        }
        return rc;
    }
    return pj_decode_value(c, f, v, depth, dst);
}

static int pj_decode_message(pj_ctx *c, const ProtobufCMessageDescriptor *d, const json_t *v,
                             unsigned depth, ProtobufCMessage **out)
{
    *out = NULL;
    if (depth > c->max_depth) {
        return pj_fail(c, PROTOJSON_ELIMIT, "nested deeper than %u levels", c->max_depth);
    }
    if (!json_is_object(v)) {
        return pj_fail(c, PROTOJSON_EINVAL, "expected an object (%s), got %s", d->name, pj_kind(v));
    }
    ProtobufCMessage *m = pj_alloc(c, d->sizeof_message);
    if (m == NULL) {
        return PROTOJSON_ENOMEM;
    }
    protobuf_c_message_init(d, m);
    int rc = PROTOJSON_OK;
    unsigned char *seen = calloc(d->n_fields > 0 ? d->n_fields : 1, 1);
    if (seen == NULL) {
        rc = pj_fail(c, PROTOJSON_ENOMEM, "out of memory");
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        int fi = pj_find_field(d, key);
        if (fi < 0) {
            size_t old = pj_path_field(c, key);
            rc = pj_fail(c, PROTOJSON_EINVAL, "unknown field of %s", d->name);
            pj_path_pop(c, old);
            goto out;
        }
        const ProtobufCFieldDescriptor *f = &d->fields[fi];
        char jn[PJ_NAME_MAX];
        size_t old = pj_path_field(c, pj_field_json_name(f, jn, sizeof jn));
        if (seen[fi]) {
            rc = pj_fail(c, PROTOJSON_EINVAL, "given twice (as \"%s\" and as \"%s\")", jn, f->name);
            goto out;
        }
        seen[fi] = 1;
        if (!json_is_null(val)) {
            rc = pj_decode_field(c, f, m, val, depth);
            if (rc != PROTOJSON_OK) {
                goto out;
            }
        }
        pj_path_pop(c, old);
    }
out:
    free(seen);
    if (rc != PROTOJSON_OK) {
        protobuf_c_message_free_unpacked(m, c->alloc);
        return rc;
    }
    *out = m;
    return PROTOJSON_OK;
}

static void pj_ctx_init(pj_ctx *c, ProtobufCAllocator *alloc, const protojson_limits *limits,
                        char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->alloc = alloc != NULL ? alloc : &pj_system_allocator;
    c->max_depth =
        limits != NULL && limits->max_depth > 0 ? limits->max_depth : PROTOJSON_DEFAULT_MAX_DEPTH;
    c->err = err;
    c->errlen = errlen;
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
}

int protojson_decode_value(const ProtobufCMessageDescriptor *desc, const json_t *value,
                           ProtobufCAllocator *alloc, const protojson_limits *limits,
                           ProtobufCMessage **out, char *err, size_t errlen)
{
    pj_ctx c;
    pj_ctx_init(&c, alloc, limits, err, errlen);
    *out = NULL;
    if (desc == NULL || desc->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC || value == NULL) {
        return pj_fail(&c, PROTOJSON_EINVAL, "not a protobuf-c message descriptor");
    }
    return pj_decode_message(&c, desc, value, 1, out);
}

int protojson_decode(const ProtobufCMessageDescriptor *desc, const char *json, size_t len,
                     ProtobufCAllocator *alloc, const protojson_limits *limits,
                     ProtobufCMessage **out, char *err, size_t errlen)
{
    pj_ctx c;
    pj_ctx_init(&c, alloc, limits, err, errlen);
    *out = NULL;
    size_t max =
        limits != NULL && limits->max_bytes > 0 ? limits->max_bytes : PROTOJSON_DEFAULT_MAX_BYTES;
    if (len > max) {
        return pj_fail(&c, PROTOJSON_ELIMIT, "JSON of %zu bytes exceeds the %zu byte limit", len,
                       max);
    }
    json_error_t je;
    json_t *v = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (v == NULL) {
        return pj_fail(&c, PROTOJSON_EINVAL, "invalid JSON at line %d column %d: %s", je.line,
                       je.column, je.text);
    }
    int rc = protojson_decode_value(desc, v, alloc, limits, out, err, errlen);
    json_decref(v);
    return rc;
}

/* --- message -> JSON ---------------------------------------------------------------------- */

static int pj_encode_message(pj_ctx *c, const ProtobufCMessage *m, unsigned depth, json_t **out);

static int pj_set(pj_ctx *c, json_t *obj, const char *key, json_t *v)
{
    if (v == NULL || json_object_set_new(obj, key, v) != 0) {
        return pj_fail(c, PROTOJSON_ENOMEM, "out of memory");
    }
    return PROTOJSON_OK;
}

static json_t *pj_u64_text(uint64_t u)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, u);
    return json_string(buf);
}

static json_t *pj_i64_text(int64_t i)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRId64, i);
    return json_string(buf);
}

static json_t *pj_double(double d)
{
    if (isnan(d)) {
        return json_string("NaN");
    }
    if (isinf(d)) {
        return json_string(d > 0 ? "Infinity" : "-Infinity");
    }
    return json_real(d);
}

/* One value of f's type at src as JSON (*out, a new reference). */
static int pj_encode_value(pj_ctx *c, const ProtobufCFieldDescriptor *f, const void *src,
                           unsigned depth, json_t **out)
{
    json_t *v = NULL;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        v = json_integer(*(const int32_t *)src);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        v = json_integer(*(const uint32_t *)src);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        v = pj_i64_text(*(const int64_t *)src);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        v = pj_u64_text(*(const uint64_t *)src);
        break;
    case PROTOBUF_C_TYPE_FLOAT:
        v = pj_double(*(const float *)src);
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
        v = pj_double(*(const double *)src);
        break;
    case PROTOBUF_C_TYPE_BOOL:
        v = json_boolean(*(const protobuf_c_boolean *)src);
        break;
    case PROTOBUF_C_TYPE_ENUM: {
        int n = *(const int *)src;
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, n);
        v = ev != NULL ? json_string(ev->name) : json_integer(n);
        break;
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)src;
        v = json_string(s != NULL ? s : "");
        if (v == NULL) {
            return pj_fail(c, PROTOJSON_EINVAL, "the string is not valid UTF-8");
        }
        break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = src;
        if (b->len > (size_t)INT32_MAX / 4 * 3 - 3) {
            return pj_fail(c, PROTOJSON_ELIMIT, "%zu bytes are too many to encode", b->len);
        }
        size_t n = (b->len + 2) / 3 * 4;
        unsigned char *text = malloc(n + 1);
        if (text == NULL) {
            return pj_fail(c, PROTOJSON_ENOMEM, "out of memory");
        }
        int w = b->len > 0 ? EVP_EncodeBlock(text, b->data, (int)b->len) : 0;
        text[w > 0 ? w : 0] = '\0';
        v = json_stringn((const char *)text, w > 0 ? (size_t)w : 0);
        free(text);
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)src;
        if (sub == NULL) {
            v = json_object();
            break;
        }
        return pj_encode_message(c, sub, depth + 1, out);
    }
    }
    if (v == NULL) {
        return pj_fail(c, PROTOJSON_ENOMEM, "out of memory");
    }
    *out = v;
    return PROTOJSON_OK;
}

/* Whether f of m is written: set in its oneof, present when optional, not at its default. */
static bool pj_present(const ProtobufCFieldDescriptor *f, const ProtobufCMessage *m)
{
    const char *member = (const char *)m + f->offset;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        return *(const uint32_t *)((const char *)m + f->quantifier_offset) == f->id;
    }
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        return *(const size_t *)((const char *)m + f->quantifier_offset) > 0;
    }
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        return *(void *const *)member != NULL;
    }
    if (f->label == PROTOBUF_C_LABEL_REQUIRED) {
        return true;
    }
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL) {
        if (f->type == PROTOBUF_C_TYPE_STRING) {
            const char *s = *(char *const *)member;
            return s != NULL && s != f->default_value;
        }
        return *(const protobuf_c_boolean *)((const char *)m + f->quantifier_offset) != 0;
    }
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)member;
        return s != NULL && s[0] != '\0';
    }
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)member)->len > 0;
    /* -0.0 is a default here as in protobuf-c's binary form, which does not write it: both
     * forms of one message must say the same. */
    case PROTOBUF_C_TYPE_FLOAT:
        return *(const float *)member != 0;
    case PROTOBUF_C_TYPE_DOUBLE:
        return *(const double *)member != 0;
    case PROTOBUF_C_TYPE_BOOL:
        return *(const protobuf_c_boolean *)member != 0;
    default: {
        size_t size = pj_value_size(f);
        static const unsigned char zero[8];
        return memcmp(member, zero, size) != 0;
    }
    }
}

static int pj_encode_map_key(pj_ctx *c, const ProtobufCFieldDescriptor *kf,
                             const ProtobufCMessage *entry, char *buf, size_t n, const char **key)
{
    const void *src = (const char *)entry + kf->offset;
    switch (kf->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)src;
        *key = s != NULL ? s : "";
        return PROTOJSON_OK;
    }
    case PROTOBUF_C_TYPE_BOOL:
        *key = *(const protobuf_c_boolean *)src ? "true" : "false";
        return PROTOJSON_OK;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        snprintf(buf, n, "%" PRId32, *(const int32_t *)src);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        snprintf(buf, n, "%" PRIu32, *(const uint32_t *)src);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        snprintf(buf, n, "%" PRId64, *(const int64_t *)src);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        snprintf(buf, n, "%" PRIu64, *(const uint64_t *)src);
        break;
    default:
        return pj_fail(c, PROTOJSON_EINVAL, "map key type %d is not supported", (int)kf->type);
    }
    *key = buf;
    return PROTOJSON_OK;
}

static int pj_encode_field(pj_ctx *c, const ProtobufCFieldDescriptor *f, const ProtobufCMessage *m,
                           unsigned depth, json_t **out)
{
    const char *member = (const char *)m + f->offset;
    if (f->label != PROTOBUF_C_LABEL_REPEATED) {
        return pj_encode_value(c, f, member, depth, out);
    }
    if (depth + 1 > c->max_depth) {
        return pj_fail(c, PROTOJSON_ELIMIT, "nested deeper than %u levels", c->max_depth);
    }
    size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
    const void *arr = *(void *const *)member;
    if (n > 0 && arr == NULL) {
        return pj_fail(c, PROTOJSON_EINVAL, "%zu elements but no array", n);
    }
    if (pj_is_map(f)) {
        const ProtobufCMessageDescriptor *ed = f->descriptor;
        const ProtobufCFieldDescriptor *kf = protobuf_c_message_descriptor_get_field(ed, 1);
        const ProtobufCFieldDescriptor *vf = protobuf_c_message_descriptor_get_field(ed, 2);
        json_t *obj = json_object();
        if (obj == NULL) {
            return pj_fail(c, PROTOJSON_ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < n; i++) {
            const ProtobufCMessage *entry = ((ProtobufCMessage *const *)arr)[i];
            if (entry == NULL) {
                continue;
            }
            char kbuf[24];
            const char *key = NULL;
            json_t *v = NULL;
            int rc = pj_encode_map_key(c, kf, entry, kbuf, sizeof kbuf, &key);
            if (rc == PROTOJSON_OK) {
                size_t old = pj_path_push(c, "[\"%.40s\"]", key);
                rc = pj_encode_value(c, vf, (const char *)entry + vf->offset, depth + 1, &v);
                if (rc == PROTOJSON_OK) {
                    rc = pj_set(c, obj, key, v);
                }
                pj_path_pop(c, old);
            }
            if (rc != PROTOJSON_OK) {
                json_decref(obj);
                return rc;
            }
        }
        *out = obj;
        return PROTOJSON_OK;
    }
    json_t *a = json_array();
    if (a == NULL) {
        return pj_fail(c, PROTOJSON_ENOMEM, "out of memory");
    }
    size_t size = pj_value_size(f);
    for (size_t i = 0; i < n; i++) {
        size_t old = pj_path_push(c, "[%zu]", i);
        json_t *v = NULL;
        int rc = pj_encode_value(c, f, (const char *)arr + i * size, depth + 1, &v);
        if (rc == PROTOJSON_OK && json_array_append_new(a, v) != 0) {
            rc = pj_fail(c, PROTOJSON_ENOMEM, "out of memory");
        }
        pj_path_pop(c, old);
        if (rc != PROTOJSON_OK) {
            json_decref(a);
            return rc;
        }
    }
    *out = a;
    return PROTOJSON_OK;
}

static int pj_encode_message(pj_ctx *c, const ProtobufCMessage *m, unsigned depth, json_t **out)
{
    if (depth > c->max_depth) {
        return pj_fail(c, PROTOJSON_ELIMIT, "nested deeper than %u levels", c->max_depth);
    }
    const ProtobufCMessageDescriptor *d = m->descriptor;
    if (d == NULL || d->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC) {
        return pj_fail(c, PROTOJSON_EINVAL, "not a protobuf-c message");
    }
    json_t *obj = json_object();
    if (obj == NULL) {
        return pj_fail(c, PROTOJSON_ENOMEM, "out of memory");
    }
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (!pj_present(f, m)) {
            continue;
        }
        char jn[PJ_NAME_MAX];
        const char *name = pj_field_json_name(f, jn, sizeof jn);
        size_t old = pj_path_field(c, name);
        json_t *v = NULL;
        int rc = pj_encode_field(c, f, m, depth, &v);
        if (rc == PROTOJSON_OK) {
            rc = pj_set(c, obj, name, v);
        }
        pj_path_pop(c, old);
        if (rc != PROTOJSON_OK) {
            json_decref(obj);
            return rc;
        }
    }
    *out = obj;
    return PROTOJSON_OK;
}

int protojson_encode(const ProtobufCMessage *msg, const protojson_limits *limits, json_t **out,
                     char *err, size_t errlen)
{
    pj_ctx c;
    pj_ctx_init(&c, NULL, limits, err, errlen);
    *out = NULL;
    if (msg == NULL) {
        return pj_fail(&c, PROTOJSON_EINVAL, "no message");
    }
    return pj_encode_message(&c, msg, 1, out);
}

int protojson_encode_text(const ProtobufCMessage *msg, const protojson_limits *limits, char **out,
                          char *err, size_t errlen)
{
    *out = NULL;
    json_t *v = NULL;
    int rc = protojson_encode(msg, limits, &v, err, errlen);
    if (rc != PROTOJSON_OK) {
        return rc;
    }
    char *text = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    if (text == NULL) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "out of memory writing JSON");
        }
        return PROTOJSON_ENOMEM;
    }
    *out = text;
    return PROTOJSON_OK;
}
