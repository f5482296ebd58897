/*
 * svc_health.c - charter.v1.Health: is this charterd serving, and is its database up.
 *
 * Callable without a token, so load balancers and the test harness can probe it. It makes one
 * database round trip (store_ping: PING plus the query library version) within the call's
 * deadline and reveals nothing about the graph's contents.
 */
#include <protobuf-c/protobuf-c.h>

#include "charter.pb-c.h"
#include "rpc/services.h"

static int svc_health_check(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    (void)in;
    Charter__V1__HealthResponse *r = call_alloc(c, sizeof *r);
    if (r == NULL) {
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    charter__v1__health_response__init(r);
    int rc = store_ping(c->st);
    static char serving[] = "serving", down[] = "database_down", up[] = "up", db_down[] = "down",
                library[] = STORE_LIBRARY_VERSION;
    r->status = rc == STATUS_OK ? serving : down;
    /* EPROTO means Redis answered but the library is missing or of another version. */
    r->database = (rc == STATUS_OK || rc == STATUS_EPROTO) ? up : db_down;
    if (rc == STATUS_OK) {
        r->library_version = library;
    }
    if ((r->version = call_strdup(c, c->env->version)) == NULL ||
        (r->graph = call_strdup(c, c->env->graph)) == NULL) {
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    r->workers = c->env->workers;
    static char operator_role[] = "operator", viewer_role[] = "viewer", host_role[] = "host",
                admin_role[] = "admin", no_role[] = "";
    r->role = c->role == ROLE_OPERATOR ? operator_role
              : c->role == ROLE_VIEWER ? viewer_role
              : c->role == ROLE_HOST   ? host_role
              : c->role == ROLE_ADMIN  ? admin_role
                                       : no_role;
    r->scripted_only = c->env->scripted_only;
    /* The tenant the call addressed and who called (never a secret). */
    if ((r->tenant = call_strdup(c, c->tenant)) == NULL ||
        (r->caller = call_strdup(c, c->caller)) == NULL) {
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    *out = &r->base;
    return RPC_OK;
}

/* The Health service: one row per method, checked against the generated descriptor at
 * startup (dispatch_check_tables); dispatch enforces each row's columns (services.h). */
const svc_method svc_health_methods[] = {
    {"Check", &charter__v1__health_request__descriptor, &charter__v1__health_response__descriptor,
     ROLE_NONE, SVC_NO_HOST, SVC_QUOTA_NONE, SVC_SCRIPTED_SERVED, svc_health_check},
};
const size_t svc_health_methods_len = sizeof svc_health_methods / sizeof svc_health_methods[0];
