/*
 * fuzz_protojson.c - libFuzzer target for the proto3 JSON mapping (proto/protojson.c).
 *
 * The first byte picks a message type among the request and response messages of every
 * charter.v1 method (the types HTTP/JSON and `charter call` decode), the rest is JSON text.
 * Whatever decodes must survive the round trips the mapping promises: encode -> decode ->
 * encode gives the same text, and the binary form decodes back to the same JSON. Decoding runs
 * under a small allocation budget so failures half way (freeing a partial message) are covered.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charter.pb-c.h"
#include "protojson.h"

static const ProtobufCServiceDescriptor *const services[] = {
    &charter__v1__runs__descriptor,     &charter__v1__gate__descriptor,
    &charter__v1__grants__descriptor,   &charter__v1__health__descriptor,
    &charter__v1__evidence__descriptor, &charter__v1__workflows__descriptor,
};

typedef struct {
    size_t used, limit;
} budget;

static void *budget_alloc(void *data, size_t size)
{
    budget *b = data;
    if (size > b->limit - b->used) {
        return NULL;
    }
    size_t *p = malloc(size + 2 * sizeof(size_t));
    if (p == NULL) {
        return NULL;
    }
    p[0] = size;
    b->used += size;
    return p + 2;
}

static void budget_free(void *data, void *ptr)
{
    budget *b = data;
    if (ptr != NULL) {
        size_t *p = (size_t *)ptr - 2;
        b->used -= p[0];
        free(p);
    }
}

static const ProtobufCMessageDescriptor *pick(uint8_t k)
{
    unsigned n = 0;
    for (size_t i = 0; i < sizeof services / sizeof services[0]; i++) {
        n += services[i]->n_methods * 2;
    }
    unsigned want = k % n;
    for (size_t i = 0; i < sizeof services / sizeof services[0]; i++) {
        for (unsigned m = 0; m < services[i]->n_methods; m++) {
            if (want == 0) {
                return services[i]->methods[m].input;
            }
            if (want == 1) {
                return services[i]->methods[m].output;
            }
            want -= 2;
        }
    }
    return &charter__v1__rpc_request__descriptor;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    const ProtobufCMessageDescriptor *d =
        data[0] == 0xff ? &charter__v1__rpc_request__descriptor : pick(data[0]);
    budget b = {0, 64 * 1024};
    ProtobufCAllocator alloc = {budget_alloc, budget_free, &b};
    protojson_limits limits = {64 * 1024, 16};
    ProtobufCMessage *m = NULL;
    char err[256];
    if (protojson_decode(d, (const char *)data + 1, size - 1, &alloc, &limits, &m, err,
                         sizeof err) != PROTOJSON_OK) {
        if (b.used != 0 || m != NULL) {
            abort(); /* a failed decode must free everything */
        }
        return 0;
    }
    char *t1 = NULL, *t2 = NULL, *t3 = NULL;
    if (protojson_encode_text(m, &limits, &t1, err, sizeof err) == PROTOJSON_OK) {
        ProtobufCMessage *m2 = NULL;
        if (protojson_decode(d, t1, strlen(t1), NULL, &limits, &m2, err, sizeof err) !=
            PROTOJSON_OK) {
            fprintf(stderr, "re-decoding %s failed: %s\n", t1, err);
            abort();
        }
        if (protojson_encode_text(m2, &limits, &t2, err, sizeof err) != PROTOJSON_OK ||
            strcmp(t1, t2) != 0) {
            abort();
        }
        protobuf_c_message_free_unpacked(m2, NULL);
        size_t n = protobuf_c_message_get_packed_size(m);
        uint8_t *buf = malloc(n + 1);
        if (buf != NULL) {
            protobuf_c_message_pack(m, buf);
            ProtobufCMessage *m3 = protobuf_c_message_unpack(d, NULL, n, buf);
            if (m3 == NULL || protojson_encode_text(m3, &limits, &t3, err, sizeof err) != 0 ||
                strcmp(t1, t3) != 0) {
                abort();
            }
            protobuf_c_message_free_unpacked(m3, NULL);
            free(buf);
        }
    }
    free(t1);
    free(t2);
    free(t3);
    protobuf_c_message_free_unpacked(m, &alloc);
    if (b.used != 0) {
        abort();
    }
    return 0;
}
