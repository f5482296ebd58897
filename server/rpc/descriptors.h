/*
 * descriptors.h - the descriptors of charterd's API, compiled in: each proto file it serves
 * (charter.proto, health.proto, reflection.proto, reflection_v1alpha.proto) as the serialized
 * google.protobuf.FileDescriptorProto protoc wrote at build time. Server reflection answers
 * with them, and the gRPC listener reads from them which methods stream: protobuf-c's own
 * descriptors do not say.
 */
#ifndef CHARTER_DESCRIPTORS_H
#define CHARTER_DESCRIPTORS_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>

/* How a method's messages flow, from its descriptor: one request and one response, or a
 * stream on either side. */
typedef enum {
    DESCRIPTORS_UNARY = 0,
    DESCRIPTORS_SERVER_STREAM = 1, /* one request, a stream of responses */
    DESCRIPTORS_CLIENT_STREAM = 2, /* a stream of requests, one response */
    DESCRIPTORS_BIDI_STREAM = 3,   /* a stream each way */
} descriptors_shape;

/* Reads the compiled-in descriptors (once; later calls answer the first's result). Returns 0, or
 * -1 with a one-line reason in err (errlen bytes; err may be NULL with errlen 0). */
int descriptors_load(char *err, size_t errlen);

/* Checks the descriptors against the n services served (the dispatch table's): every service
 * and method is described, with the same request and response messages. Returns 0, or -1 with
 * a one-line reason in err (charterd then refuses to start). */
int descriptors_check(const ProtobufCServiceDescriptor *const *served, size_t n, char *err,
                      size_t errlen);

/* The serialized FileDescriptorProto of the file named name ("charter.proto"), or NULL. Static
 * storage, after descriptors_load succeeded. */
const ProtobufCBinaryData *descriptors_file(const char *name);

/* The name of the file defining the fully qualified symbol (a message, an enum, a service or a
 * method: "charter.v1.Run", "charter.v1.Gate.Deliver"), or NULL when none does. */
const char *descriptors_file_of_symbol(const char *symbol);

/* The names of the files name imports, in order (*n of them); NULL with *n 0 for an unknown
 * file. Static storage. */
char **descriptors_imports(const char *name, size_t *n);

/* How "/<service>/<method>" streams; DESCRIPTORS_UNARY for a method not described. */
descriptors_shape descriptors_shape_of(const char *path);

#endif
