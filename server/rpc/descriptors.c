/*
 * descriptors.c - the compiled-in descriptors of the API (see descriptors.h).
 *
 * CMakeLists.txt runs protoc with --descriptor_set_out over the served proto files and embeds
 * the FileDescriptorSet as embedded_descriptors. It is read with protobuf-c through
 * proto/descriptor_view.proto, a view of the few fields of descriptor.proto used here (every
 * other field is skipped as unknown), so no descriptor parsing is written by hand. Read once,
 * kept for the life of the process, never written after.
 */
#include "rpc/descriptors.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "descriptor_view.pb-c.h"

extern const char embedded_descriptors[];
extern const size_t embedded_descriptors_len;

#define DESCRIPTORS_MAX_FILES 16

static struct {
    Charter__Descriptor__FileSetView *set;
    Charter__Descriptor__FileView *files[DESCRIPTORS_MAX_FILES];
    size_t n;
    int rc;
    char err[256];
} descriptors;

static pthread_once_t descriptors_once = PTHREAD_ONCE_INIT;

static Charter__Descriptor__FileView *descriptors_view(const char *name, size_t *at)
{
    for (size_t i = 0; i < descriptors.n; i++) {
        if (strcmp(descriptors.files[i]->name, name) == 0) {
            if (at != NULL) {
                *at = i;
            }
            return descriptors.files[i];
        }
    }
    return NULL;
}

static const Charter__Descriptor__ServiceView *descriptors_service(const char *full)
{
    for (size_t i = 0; i < descriptors.n; i++) {
        const Charter__Descriptor__FileView *f = descriptors.files[i];
        size_t plen = strlen(f->package);
        if (strncmp(full, f->package, plen) != 0 || full[plen] != '.') {
            continue;
        }
        for (size_t s = 0; s < f->n_service; s++) {
            if (strcmp(f->service[s]->name, full + plen + 1) == 0) {
                return f->service[s];
            }
        }
    }
    return NULL;
}

static const Charter__Descriptor__MethodView *
descriptors_method(const Charter__Descriptor__ServiceView *sv, const char *name)
{
    for (size_t m = 0; sv != NULL && m < sv->n_method; m++) {
        if (strcmp(sv->method[m]->name, name) == 0) {
            return sv->method[m];
        }
    }
    return NULL;
}

/* "." + a protobuf-c message name, as descriptor.proto writes a method's types. */
static bool descriptors_same_type(const char *dotted, const ProtobufCMessageDescriptor *d)
{
    return dotted != NULL && dotted[0] == '.' && strcmp(dotted + 1, d->name) == 0;
}

int descriptors_check(const ProtobufCServiceDescriptor *const *served, size_t n, char *err,
                      size_t errlen)
{
    if (descriptors_load(err, errlen) != 0) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const ProtobufCServiceDescriptor *d = served[i];
        const Charter__Descriptor__ServiceView *sv = descriptors_service(d->name);
        for (unsigned m = 0; m < d->n_methods; m++) {
            const Charter__Descriptor__MethodView *mv = descriptors_method(sv, d->methods[m].name);
            if (mv == NULL || !descriptors_same_type(mv->input_type, d->methods[m].input) ||
                !descriptors_same_type(mv->output_type, d->methods[m].output)) {
                snprintf(err, errlen,
                         "the compiled-in descriptors do not describe %s/%s as served (rebuild "
                         "charterd: its descriptors and its generated code come from one "
                         "proto/)",
                         d->name, d->methods[m].name);
                return -1;
            }
        }
    }
    return 0;
}

static void descriptors_read(void)
{
    descriptors.rc = -1;
    descriptors.set = charter__descriptor__file_set_view__unpack(
        NULL, embedded_descriptors_len, (const uint8_t *)embedded_descriptors);
    if (descriptors.set == NULL || descriptors.set->n_file > DESCRIPTORS_MAX_FILES) {
        snprintf(descriptors.err, sizeof descriptors.err,
                 "the compiled-in descriptors cannot be read (rebuild charterd)");
        return;
    }
    for (size_t i = 0; i < descriptors.set->n_file; i++) {
        const ProtobufCBinaryData *b = &descriptors.set->file[i];
        Charter__Descriptor__FileView *f =
            charter__descriptor__file_view__unpack(NULL, b->len, b->data);
        if (f == NULL) {
            snprintf(descriptors.err, sizeof descriptors.err,
                     "the compiled-in descriptor of file %zu cannot be read (rebuild charterd)", i);
            return;
        }
        descriptors.files[descriptors.n++] = f;
    }
    descriptors.rc = 0;
}

int descriptors_load(char *err, size_t errlen)
{
    pthread_once(&descriptors_once, descriptors_read);
    if (descriptors.rc != 0) {
        snprintf(err, errlen, "%s", descriptors.err);
    }
    return descriptors.rc;
}

const ProtobufCBinaryData *descriptors_file(const char *name)
{
    size_t at = 0;
    if (descriptors_load(NULL, 0) != 0 || name == NULL || descriptors_view(name, &at) == NULL) {
        return NULL;
    }
    return &descriptors.set->file[at];
}

char **descriptors_imports(const char *name, size_t *n)
{
    *n = 0;
    const Charter__Descriptor__FileView *f =
        descriptors_load(NULL, 0) == 0 && name != NULL ? descriptors_view(name, NULL) : NULL;
    if (f == NULL) {
        return NULL;
    }
    *n = f->n_dependency;
    return f->dependency;
}

/* Whether rest (a symbol with its package taken off) names m, or a message or enum nested in
 * it. */
static bool descriptors_in_message(const Charter__Descriptor__MessageView *m, const char *rest)
{
    size_t len = strlen(m->name);
    if (strncmp(rest, m->name, len) != 0) {
        return false;
    }
    if (rest[len] == '\0') {
        return true;
    }
    if (rest[len] != '.') {
        return false;
    }
    const char *inner = rest + len + 1;
    for (size_t e = 0; e < m->n_enum_type; e++) {
        if (strcmp(m->enum_type[e]->name, inner) == 0) {
            return true;
        }
    }
    for (size_t k = 0; k < m->n_nested_type; k++) {
        if (descriptors_in_message(m->nested_type[k], inner)) {
            return true;
        }
    }
    return false;
}

static bool descriptors_defines(const Charter__Descriptor__FileView *f, const char *rest)
{
    for (size_t i = 0; i < f->n_message_type; i++) {
        if (descriptors_in_message(f->message_type[i], rest)) {
            return true;
        }
    }
    for (size_t i = 0; i < f->n_enum_type; i++) {
        if (strcmp(f->enum_type[i]->name, rest) == 0) {
            return true;
        }
    }
    for (size_t s = 0; s < f->n_service; s++) {
        const Charter__Descriptor__ServiceView *sv = f->service[s];
        size_t len = strlen(sv->name);
        if (strncmp(rest, sv->name, len) == 0 &&
            (rest[len] == '\0' || (rest[len] == '.' && descriptors_method(sv, rest + len + 1)))) {
            return true;
        }
    }
    return false;
}

const char *descriptors_file_of_symbol(const char *symbol)
{
    if (descriptors_load(NULL, 0) != 0 || symbol == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < descriptors.n; i++) {
        const Charter__Descriptor__FileView *f = descriptors.files[i];
        size_t plen = strlen(f->package);
        if (strncmp(symbol, f->package, plen) == 0 && symbol[plen] == '.' &&
            descriptors_defines(f, symbol + plen + 1)) {
            return f->name;
        }
    }
    return NULL;
}

descriptors_shape descriptors_shape_of(const char *path)
{
    char service[160];
    const char *slash = path != NULL && path[0] == '/' ? strchr(path + 1, '/') : NULL;
    if (descriptors_load(NULL, 0) != 0 || slash == NULL ||
        (size_t)(slash - path) > sizeof service) {
        return DESCRIPTORS_UNARY;
    }
    snprintf(service, sizeof service, "%.*s", (int)(slash - path - 1), path + 1);
    const Charter__Descriptor__MethodView *mv =
        descriptors_method(descriptors_service(service), slash + 1);
    if (mv == NULL) {
        return DESCRIPTORS_UNARY;
    }
    return (descriptors_shape)((mv->server_streaming ? 1 : 0) | (mv->client_streaming ? 2 : 0));
}
