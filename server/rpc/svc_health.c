/*
 * svc_health.c - charter.v1.Health: is this charterd serving, and is its database up.
 *
 * Callable without a token, so load balancers and the test harness can probe it. Served on a
 * worker it makes one database round trip (store_ping: the query library version) within the
 * call's deadline; served without a store (dispatch_serve_quick, on the transport's callback
 * thread) it answers the serving status the health monitor keeps, from a round trip begun at
 * most SERVING_FRESH_MS ago (rpc/serving.h). Either way it reveals nothing about the graph's
 * contents.
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
    int rc = c->st != NULL ? store_ping(c->st) : serving_status(c->env->serving);
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
