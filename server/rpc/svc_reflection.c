/*
 * svc_reflection.c - charter.v1.Reflection: the methods charterd serves, so tools can
 * discover the API. The answer is read from the dispatch table (the rows charterd routes and
 * checks against the generated descriptors at startup), never from a list kept by hand.
 */
#include <protobuf-c/protobuf-c.h>
#include <stdio.h>
#include <string.h>

#include "charter.pb-c.h"
#include "rpc/dispatch.h"
#include "rpc/services.h"

static char *svc_reflection_role(call_role r)
{
    static char none[] = "none", viewer[] = "viewer", operator_role[] = "operator",
                admin[] = "admin";
    return r == ROLE_ADMIN      ? admin
           : r == ROLE_OPERATOR ? operator_role
           : r == ROLE_VIEWER   ? viewer
                                : none;
}

static int svc_reflection_list(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    (void)in;
    Charter__V1__ListMethodsResponse *r = call_alloc(c, sizeof *r);
    if (r == NULL) {
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    charter__v1__list_methods_response__init(r);
    size_t n_svcs = 0, total = 0;
    const dispatch_service *svcs = dispatch_services_of(&n_svcs);
    for (size_t i = 0; i < n_svcs; i++) {
        total += *svcs[i].n_methods;
    }
    r->methods = call_alloc(c, (total > 0 ? total : 1) * sizeof *r->methods);
    if (r->methods == NULL) {
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    for (size_t i = 0; i < n_svcs; i++) {
        for (size_t m = 0; m < *svcs[i].n_methods; m++) {
            const svc_method *row = &svcs[i].methods[m];
            Charter__V1__MethodInfo *mi = call_alloc(c, sizeof *mi);
            size_t len = strlen(svcs[i].desc->name) + strlen(row->name) + 3;
            char *name = call_alloc(c, len);
            if (mi == NULL || name == NULL) {
                return call_fail(c, RPC_INTERNAL, "out of memory");
            }
            charter__v1__method_info__init(mi);
            snprintf(name, len, "/%s/%s", svcs[i].desc->name, row->name);
            mi->name = name;
            mi->request_type = (char *)row->request->name;
            mi->response_type = (char *)row->response->name;
            mi->min_role = svc_reflection_role(row->min_role);
            r->methods[r->n_methods++] = mi;
        }
    }
    *out = &r->base;
    return RPC_OK;
}

/* charter.v1.Reflection: one row, checked against the generated descriptor at startup. */
const svc_method svc_reflection_methods[] = {
    {"ListMethods", &charter__v1__list_methods_request__descriptor,
     &charter__v1__list_methods_response__descriptor, ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, svc_reflection_list},
};
const size_t svc_reflection_methods_len =
    sizeof svc_reflection_methods / sizeof svc_reflection_methods[0];
