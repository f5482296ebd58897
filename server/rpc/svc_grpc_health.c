/*
 * svc_grpc_health.c - grpc.health.v1.Health: the standard health check shape, per service.
 *
 * Tools that speak the gRPC convention (load balancers, probes) ask for "" (the server as a
 * whole) or a service's full name ("charter.v1.Gate"). Every service charterd serves depends
 * on its database alone, so each is SERVING when one database round trip (store_ping) succeeds
 * and NOT_SERVING otherwise. The names known are read from the dispatch table, not listed here.
 * Req/rep has no server stream, so Watch is a long poll (see proto/health.proto).
 */
#include <protobuf-c/protobuf-c.h>
#include <string.h>
#include <time.h>

#include "rpc/dispatch.h"
#include "health.pb-c.h"
#include "rpc/services.h"

typedef Grpc__Health__V1__HealthCheckResponse__ServingStatus svc_grpc_health_status;

/* How often Watch asks the database again, and how much of the deadline it leaves for the
 * reply to travel back, in milliseconds. */
#define SVC_GRPC_HEALTH_POLL_MS 200
#define SVC_GRPC_HEALTH_MARGIN_MS 250
/* The longest a caller without a token may watch. */
#define SVC_GRPC_HEALTH_ANON_MS 10000

static bool svc_grpc_health_known(const char *service)
{
    if (service == NULL || service[0] == '\0') {
        return true;
    }
    size_t n = 0;
    const dispatch_service *svcs = dispatch_services_of(&n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(svcs[i].desc->name, service) == 0) {
            return true;
        }
    }
    return false;
}

static svc_grpc_health_status svc_grpc_health_now(call *c, const char *service)
{
    if (!svc_grpc_health_known(service)) {
        return GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN;
    }
    return store_ping(c->st) == STATUS_OK
               ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
               : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
}

static const char *svc_grpc_health_name(svc_grpc_health_status s)
{
    const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
        &grpc__health__v1__health_check_response__serving_status__descriptor, (int)s);
    return v != NULL ? v->name : "UNKNOWN";
}

static int svc_grpc_health_reply(call *c, svc_grpc_health_status s, ProtobufCMessage **out)
{
    Grpc__Health__V1__HealthCheckResponse *r = call_alloc(c, sizeof *r);
    if (r == NULL) {
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    grpc__health__v1__health_check_response__init(r);
    r->status = s;
    *out = &r->base;
    return RPC_OK;
}

static int svc_grpc_health_check(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Grpc__Health__V1__HealthCheckRequest *rq =
        (const Grpc__Health__V1__HealthCheckRequest *)in;
    svc_grpc_health_status s = svc_grpc_health_now(c, rq->service);
    if (s == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN) {
        return call_fail(c, RPC_NOT_FOUND, "service \"%s\" not found", rq->service);
    }
    return svc_grpc_health_reply(c, s, out);
}

static long svc_grpc_health_ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (long)((t1.tv_sec - t0->tv_sec) * 1000L + (t1.tv_nsec - t0->tv_nsec) / 1000000L);
}

/* Answers when the status differs from c->watch_last (a status name; NULL or "" answers at
 * once) or when less than SVC_GRPC_HEALTH_MARGIN_MS of its wait remain. Holds the worker for up
 * to the call's deadline (SVC_GRPC_HEALTH_ANON_MS without a token), and only with a long-wait
 * slot (call_wait_begin). */
static int svc_grpc_health_watch(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Grpc__Health__V1__HealthCheckRequest *rq =
        (const Grpc__Health__V1__HealthCheckRequest *)in;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* A caller without a token watches for SVC_GRPC_HEALTH_ANON_MS at most, and every watcher
     * needs a long-wait slot (call_wait_begin); without one, the status now is the answer. */
    long budget = c->timeout_ms;
    if (c->role == ROLE_NONE && budget > SVC_GRPC_HEALTH_ANON_MS)
        budget = SVC_GRPC_HEALTH_ANON_MS;
    budget = call_wait_begin(c, (int)budget);
    for (;;) {
        /* Each round trip gets its own bound; the call's deadline is kept by the loop. */
        store_set_timeout(c->st, SVC_GRPC_HEALTH_POLL_MS * 5);
        svc_grpc_health_status s = svc_grpc_health_now(c, rq->service);
        long left = budget - svc_grpc_health_ms_since(&t0);
        if (c->watch_last == NULL || c->watch_last[0] == '\0' ||
            strcmp(c->watch_last, svc_grpc_health_name(s)) != 0 ||
            left < SVC_GRPC_HEALTH_MARGIN_MS + SVC_GRPC_HEALTH_POLL_MS) {
            call_wait_end(c);
            return svc_grpc_health_reply(c, s, out);
        }
        struct timespec nap = {0, SVC_GRPC_HEALTH_POLL_MS * 1000000L};
        nanosleep(&nap, NULL);
    }
}

/* grpc.health.v1.Health: one row per method, checked against the generated descriptor at
 * startup (dispatch_check_tables). Both callable without a token, like charter.v1.Health. */
const svc_method svc_grpc_health_methods[] = {
    {"Check", &grpc__health__v1__health_check_request__descriptor,
     &grpc__health__v1__health_check_response__descriptor, ROLE_NONE, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, svc_grpc_health_check},
    {"Watch", &grpc__health__v1__health_check_request__descriptor,
     &grpc__health__v1__health_check_response__descriptor, ROLE_NONE, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, svc_grpc_health_watch},
};
const size_t svc_grpc_health_methods_len =
    sizeof svc_grpc_health_methods / sizeof svc_grpc_health_methods[0];
