/*
 * model.c - a fake model provider for the suites that run live models (see harness.h): a real
 * NNG HTTP server on 127.0.0.1 whose answers each suite chooses, delayed by a timer so that a
 * slow provider never holds one of NNG's threads, or held until the suite releases them, so
 * that a test decides when a model request ends instead of guessing how long it takes.
 *
 * Each delayed reply keeps its timer aio on a list until harness_model_stop: an aio cannot be
 * freed from its own callback, so they are all freed there, once the server has stopped.
 */
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <nng/supplemental/util/platform.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MODEL_MAX_BODY (4 * 1024 * 1024)

/* One registered path: what its handler's data points at. */
typedef struct {
    harness_model *m;
    char *path;
} model_route;

/* A held request's timer: far beyond any test, so only harness_model_release or
 * harness_model_stop ends it. */
#define MODEL_HOLD_SLEEP_MS (24 * 3600 * 1000)

/* A reply waiting for its delay to pass, or held until harness_model_release. */
typedef struct model_pending {
    nng_aio *http;  /* the request being answered */
    nng_aio *timer; /* freed by harness_model_stop */
    nng_http_res *res;
    bool held;            /* waits for harness_model_release (guarded by the model's lock) */
    atomic_bool released; /* the timer was cancelled to send the reply, not to fail it */
    struct model_pending *next;
} model_pending;

struct harness_model {
    nng_http_server *server;
    harness_model_fn fn;
    void *arg;
    atomic_int delay_ms;
    atomic_int requests;
    char url[64];
    model_route *routes;
    size_t n_routes;
    pthread_mutex_t lock; /* guards pending and stopping */
    model_pending *pending;
    bool stopping;
};

/* The timer's callback: sends the reply (the delay passed, or the request was released), or
 * fails the request when the timer was stopped. */
static void model_answer(void *arg)
{
    model_pending *p = arg;
    int rv = nng_aio_result(p->timer);
    if (rv == 0 || atomic_load(&p->released)) {
        nng_aio_set_output(p->http, 0, p->res);
        p->res = NULL; /* the server owns it now */
        nng_aio_finish(p->http, 0);
    } else {
        nng_aio_finish(p->http, rv);
    }
}

/* The response for reply (the body is freed here), or NULL. */
static nng_http_res *model_response(harness_model_reply *reply)
{
    nng_http_res *res = NULL;
    int rc = nng_http_res_alloc(&res);
    if (rc == 0)
        rc = nng_http_res_set_status(res, (uint16_t)reply->status);
    for (size_t i = 0; rc == 0 && i < reply->n_headers && i < HARNESS_MODEL_MAX_HEADERS; i++)
        rc = nng_http_res_set_header(res, reply->headers[i].name, reply->headers[i].value);
    if (rc == 0 && reply->body != NULL)
        rc = nng_http_res_copy_data(res, reply->body, strlen(reply->body));
    free(reply->body);
    reply->body = NULL;
    if (rc != 0 && res != NULL) {
        nng_http_res_free(res);
        res = NULL;
    }
    return res;
}

static void model_handle(nng_aio *aio)
{
    model_route *route = nng_http_handler_get_data(nng_aio_get_input(aio, 1));
    harness_model *m = route->m;
    atomic_fetch_add(&m->requests, 1);
    nng_http_req *req = nng_aio_get_input(aio, 0);
    void *data = NULL;
    size_t len = 0;
    nng_http_req_get_data(req, &data, &len);
    harness_model_reply reply = {.status = 200, .delay_ms = atomic_load(&m->delay_ms)};
    int rc = m->fn(m->arg, route->path, data, len, &reply);
    if (rc != 0) {
        free(reply.body);
        nng_aio_finish(aio, NNG_ENOMEM);
        return;
    }
    nng_http_res *res = model_response(&reply);
    if (res == NULL) {
        nng_aio_finish(aio, NNG_ENOMEM);
        return;
    }
    bool hold = reply.delay_ms == HARNESS_MODEL_HOLD;
    if (reply.delay_ms <= 0 && !hold) {
        nng_aio_set_output(aio, 0, res);
        nng_aio_finish(aio, 0);
        return;
    }
    model_pending *p = calloc(1, sizeof *p);
    if (p == NULL || nng_aio_alloc(&p->timer, model_answer, p) != 0) {
        free(p);
        nng_http_res_free(res);
        nng_aio_finish(aio, NNG_ENOMEM);
        return;
    }
    p->http = aio;
    p->res = res;
    p->held = hold;
    atomic_init(&p->released, false);
    pthread_mutex_lock(&m->lock);
    if (m->stopping) {
        pthread_mutex_unlock(&m->lock);
        nng_aio_free(p->timer);
        nng_http_res_free(res);
        free(p);
        nng_aio_finish(aio, NNG_ECANCELED);
        return;
    }
    p->next = m->pending;
    m->pending = p;
    /* Under the lock: never after a stop, nor after a release that should have seen it. */
    nng_sleep_aio(hold ? MODEL_HOLD_SLEEP_MS : reply.delay_ms, p->timer);
    pthread_mutex_unlock(&m->lock);
}

int harness_model_start(const char *const *paths, size_t n, harness_model_fn fn, void *arg,
                        harness_model **out)
{
    int ret = -1;
    nng_url *url = NULL;
    harness_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        goto out;
    pthread_mutex_init(&m->lock, NULL);
    if (fn == NULL || n == 0)
        goto out;
    m->fn = fn;
    m->arg = arg;
    atomic_init(&m->delay_ms, 0);
    atomic_init(&m->requests, 0);
    m->routes = calloc(n, sizeof *m->routes);
    if (m->routes == NULL)
        goto out;
    m->n_routes = n;
    if (nng_url_parse(&url, "http://127.0.0.1:0") != 0 || nng_http_server_hold(&m->server, url))
        goto out;
    for (size_t i = 0; i < n; i++) {
        nng_http_handler *h = NULL;
        m->routes[i].m = m;
        m->routes[i].path = strdup(paths[i]);
        if (m->routes[i].path == NULL || nng_http_handler_alloc(&h, paths[i], model_handle))
            goto out;
        if (nng_http_handler_set_method(h, "POST") ||
            nng_http_handler_collect_body(h, true, MODEL_MAX_BODY) ||
            nng_http_handler_set_data(h, &m->routes[i], NULL) ||
            nng_http_server_add_handler(m->server, h)) {
            nng_http_handler_free(h);
            goto out;
        }
    }
    if (nng_http_server_start(m->server) != 0)
        goto out;
    nng_sockaddr sa;
    if (nng_http_server_get_addr(m->server, &sa) != 0 || sa.s_family != NNG_AF_INET)
        goto out;
    unsigned port = ((unsigned)((const uint8_t *)&sa.s_in.sa_port)[0] << 8) |
                    ((const uint8_t *)&sa.s_in.sa_port)[1];
    snprintf(m->url, sizeof m->url, "http://127.0.0.1:%u", port);
    ret = 0;
out:
    nng_url_free(url);
    if (ret != 0) {
        fprintf(stderr, "harness: the fake model server could not start\n");
        harness_model_stop(m);
        m = NULL;
    }
    *out = m;
    return ret;
}

void harness_model_set_delay(harness_model *m, int ms)
{
    atomic_store(&m->delay_ms, ms);
}

int harness_model_requests(harness_model *m)
{
    return atomic_load(&m->requests);
}

int harness_model_release(harness_model *m)
{
    int n = 0;
    pthread_mutex_lock(&m->lock);
    for (model_pending *p = m->pending; p != NULL; p = p->next) {
        if (!p->held)
            continue;
        p->held = false;
        atomic_store(&p->released, true);
        nng_aio_cancel(p->timer); /* model_answer sends the reply */
        n++;
    }
    pthread_mutex_unlock(&m->lock);
    return n;
}

int harness_model_held(harness_model *m)
{
    int n = 0;
    pthread_mutex_lock(&m->lock);
    for (model_pending *p = m->pending; p != NULL; p = p->next)
        n += p->held ? 1 : 0;
    pthread_mutex_unlock(&m->lock);
    return n;
}

const char *harness_model_url(const harness_model *m)
{
    return m->url;
}

void harness_model_stop(harness_model *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&m->lock);
    m->stopping = true;
    model_pending *list = m->pending;
    m->pending = NULL;
    pthread_mutex_unlock(&m->lock);
    /* Timers still waiting fail their requests now, while the server still holds them. */
    for (model_pending *p = list; p != NULL; p = p->next)
        nng_aio_stop(p->timer);
    if (m->server != NULL) {
        nng_http_server_stop(m->server);
        nng_http_server_release(m->server);
    }
    while (list != NULL) {
        model_pending *p = list;
        list = p->next;
        nng_aio_free(p->timer);
        if (p->res != NULL)
            nng_http_res_free(p->res);
        free(p);
    }
    for (size_t i = 0; i < m->n_routes; i++)
        free(m->routes[i].path);
    free(m->routes);
    pthread_mutex_destroy(&m->lock);
    free(m);
}
