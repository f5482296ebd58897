/*
 * svc_grpc_reflection.c - grpc.reflection.v1 and v1alpha ServerReflection: the standard way
 * tools (grpcurl, Postman, the gRPC clients' reflection helpers) learn the services and the
 * descriptors of a server.
 *
 * ServerReflectionInfo is a stream each way with one answer per request, in order; the gRPC
 * listener feeds it one request at a time through the dispatch table, so each request here is
 * one call with its role checked like any other. The services listed are the dispatch table's,
 * the files those compiled in (rpc/descriptors.h). v1alpha carries v1's messages under another
 * package: its requests are read as v1 and its answers written back as v1alpha (same bytes).
 */
#include <protobuf-c/protobuf-c.h>
#include <stdio.h>
#include <string.h>

#include "reflection.pb-c.h"
#include "reflection_v1alpha.pb-c.h"
#include "rpc/descriptors.h"
#include "rpc/dispatch.h"
#include "rpc/services.h"

typedef Grpc__Reflection__V1__ServerReflectionRequest svc_reflect_request;
typedef Grpc__Reflection__V1__ServerReflectionResponse svc_reflect_response;

/* The files a FileDescriptorResponse carries at most: the file asked for and its imports. */
#define SVC_REFLECT_MAX_FILES 16

static void *svc_reflect_alloc(void *data, size_t size)
{
    return call_alloc(data, size);
}

static void svc_reflect_free(void *data, void *p)
{
    (void)data;
    (void)p; /* the call's arena frees it */
}

/* m re-read as the message of descriptor as (the same fields under another name), in the
 * call's arena; NULL when out of memory. */
static ProtobufCMessage *svc_reflect_convert(call *c, const ProtobufCMessage *m,
                                             const ProtobufCMessageDescriptor *as)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = call_alloc(c, n > 0 ? n : 1);
    if (buf == NULL) {
        return NULL;
    }
    protobuf_c_message_pack(m, buf);
    ProtobufCAllocator alloc = {svc_reflect_alloc, svc_reflect_free, c};
    return protobuf_c_message_unpack(as, &alloc, n, buf);
}

static int svc_reflect_services(call *c, svc_reflect_response *r)
{
    size_t n = 0;
    const dispatch_service *svcs = dispatch_services_of(&n);
    Grpc__Reflection__V1__ListServiceResponse *l = call_alloc(c, sizeof *l);
    Grpc__Reflection__V1__ServiceResponse **list = call_alloc(c, (n > 0 ? n : 1) * sizeof *list);
    if (l == NULL || list == NULL) {
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    grpc__reflection__v1__list_service_response__init(l);
    for (size_t i = 0; i < n; i++) {
        Grpc__Reflection__V1__ServiceResponse *s = call_alloc(c, sizeof *s);
        if (s == NULL) {
            return call_fail(c, RPC_INTERNAL, "out of memory");
        }
        grpc__reflection__v1__service_response__init(s);
        s->name = (char *)svcs[i].desc->name;
        list[l->n_service++] = s;
    }
    l->service = list;
    r->message_response_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_LIST_SERVICES_RESPONSE;
    r->list_services_response = l;
    return RPC_OK;
}

/* Adds name and, before it, the files it imports (each once) to files. */
static void svc_reflect_with_imports(const char *name, const char **files, size_t *n)
{
    for (size_t i = 0; i < *n; i++) {
        if (strcmp(files[i], name) == 0) {
            return;
        }
    }
    size_t k = 0;
    char **imports = descriptors_imports(name, &k);
    for (size_t i = 0; i < k; i++) {
        svc_reflect_with_imports(imports[i], files, n);
    }
    if (*n < SVC_REFLECT_MAX_FILES) {
        files[(*n)++] = name;
    }
}

static int svc_reflect_files(call *c, const char *name, svc_reflect_response *r)
{
    const char *files[SVC_REFLECT_MAX_FILES];
    size_t n = 0;
    svc_reflect_with_imports(name, files, &n);
    Grpc__Reflection__V1__FileDescriptorResponse *f = call_alloc(c, sizeof *f);
    ProtobufCBinaryData *data = call_alloc(c, n * sizeof *data);
    if (f == NULL || data == NULL) {
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    grpc__reflection__v1__file_descriptor_response__init(f);
    for (size_t i = 0; i < n; i++) {
        const ProtobufCBinaryData *b = descriptors_file(files[i]);
        if (b != NULL) {
            data[f->n_file_descriptor_proto++] = *b;
        }
    }
    f->file_descriptor_proto = data;
    r->message_response_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE;
    r->file_descriptor_response = f;
    return RPC_OK;
}

/* An answer of the stream, not a failure of the call: the stream goes on. */
static int svc_reflect_error(call *c, int code, const char *what, const char *name,
                             svc_reflect_response *r)
{
    Grpc__Reflection__V1__ErrorResponse *e = call_alloc(c, sizeof *e);
    char *msg = call_alloc(c, 320);
    if (e == NULL || msg == NULL) {
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    grpc__reflection__v1__error_response__init(e);
    snprintf(msg, 320, "%s \"%.256s\" not found", what, name != NULL ? name : "");
    e->error_code = code;
    e->error_message = msg;
    r->message_response_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE;
    r->error_response = e;
    return RPC_OK;
}

static int svc_reflect_answer(call *c, const svc_reflect_request *rq, svc_reflect_response *r)
{
    switch (rq->message_request_case) {
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_LIST_SERVICES:
        return svc_reflect_services(c, r);
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_BY_FILENAME:
        if (descriptors_file(rq->file_by_filename) == NULL) {
            return svc_reflect_error(c, RPC_NOT_FOUND, "file", rq->file_by_filename, r);
        }
        return svc_reflect_files(c, rq->file_by_filename, r);
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_SYMBOL: {
        const char *file = descriptors_file_of_symbol(rq->file_containing_symbol);
        if (file == NULL) {
            return svc_reflect_error(c, RPC_NOT_FOUND, "symbol", rq->file_containing_symbol, r);
        }
        return svc_reflect_files(c, file, r);
    }
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_EXTENSION:
        return svc_reflect_error(c, RPC_NOT_FOUND, "extension of",
                                 rq->file_containing_extension != NULL
                                     ? rq->file_containing_extension->containing_type
                                     : "",
                                 r);
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_ALL_EXTENSION_NUMBERS_OF_TYPE:
        return svc_reflect_error(c, RPC_NOT_FOUND, "extensions of type",
                                 rq->all_extension_numbers_of_type, r);
    default:
        return call_fail(c, RPC_INVALID_ARGUMENT,
                         "ServerReflectionRequest: set one of list_services, file_by_filename, "
                         "file_containing_symbol");
    }
}

static int svc_reflect_v1(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const svc_reflect_request *rq = (const svc_reflect_request *)in;
    svc_reflect_response *r = call_alloc(c, sizeof *r);
    if (r == NULL) {
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    grpc__reflection__v1__server_reflection_response__init(r);
    r->valid_host = rq->host;
    r->original_request = (svc_reflect_request *)rq;
    int rc = svc_reflect_answer(c, rq, r);
    if (rc != RPC_OK) {
        return rc;
    }
    *out = &r->base;
    return RPC_OK;
}

static int svc_reflect_v1alpha(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    ProtobufCMessage *v1 =
        svc_reflect_convert(c, in, &grpc__reflection__v1__server_reflection_request__descriptor);
    ProtobufCMessage *answer = NULL;
    if (v1 == NULL) {
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    int rc = svc_reflect_v1(c, v1, &answer);
    if (rc != RPC_OK) {
        return rc;
    }
    *out = svc_reflect_convert(c, answer,
                               &grpc__reflection__v1alpha__server_reflection_response__descriptor);
    return *out != NULL ? RPC_OK : call_fail(c, RPC_INTERNAL, "out of memory");
}

/* One row per version, checked against the generated descriptors at startup. The API's shape
 * is for a viewer, as charter.v1.Reflection/ListMethods. */
const svc_method svc_grpc_reflection_methods[] = {
    {"ServerReflectionInfo", &grpc__reflection__v1__server_reflection_request__descriptor,
     &grpc__reflection__v1__server_reflection_response__descriptor, ROLE_VIEWER, SVC_NO_HOST,
     SVC_QUOTA_NONE, SVC_SCRIPTED_SERVED, svc_reflect_v1},
};
const size_t svc_grpc_reflection_methods_len =
    sizeof svc_grpc_reflection_methods / sizeof svc_grpc_reflection_methods[0];

const svc_method svc_grpc_reflection_v1alpha_methods[] = {
    {"ServerReflectionInfo", &grpc__reflection__v1alpha__server_reflection_request__descriptor,
     &grpc__reflection__v1alpha__server_reflection_response__descriptor, ROLE_VIEWER, SVC_NO_HOST,
     SVC_QUOTA_NONE, SVC_SCRIPTED_SERVED, svc_reflect_v1alpha},
};
const size_t svc_grpc_reflection_v1alpha_methods_len =
    sizeof svc_grpc_reflection_v1alpha_methods / sizeof svc_grpc_reflection_v1alpha_methods[0];
