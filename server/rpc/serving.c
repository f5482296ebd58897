/*
 * serving.c - the monitor behind Health's serving status (see serving.h).
 *
 * One thread, one store: a round trip every SERVING_PERIOD_MS, its result and the instant it
 * began published together in one atomic word, so readers (NNG's callback threads answering
 * Health) take no lock and can never see a result paired with another round trip's time.
 */
#include "rpc/serving.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/status.h"
#include "db/store.h"

/* The published word: (start_ms << 2) | code, start_ms on CLOCK_MONOTONIC. */
enum { SERVING_UP = 0, SERVING_NO_LIBRARY = 1, SERVING_DOWN = 2 };

struct serving {
    store *st;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* stop was asked (CLOCK_MONOTONIC) */
    bool stop;
    atomic_llong word;
};

static long long serving_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* One round trip, published with the instant it began. */
static void serving_check(serving *s)
{
    long long start = serving_now_ms();
    int rc = store_ping(s->st);
    int code = rc == STATUS_OK       ? SERVING_UP
               : rc == STATUS_EPROTO ? SERVING_NO_LIBRARY
                                     : SERVING_DOWN;
    atomic_store_explicit(&s->word, (start << 2) | code, memory_order_release);
}

static void *serving_main(void *arg)
{
    serving *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        pthread_mutex_unlock(&s->mu);
        long long start = serving_now_ms();
        serving_check(s);
        struct timespec until;
        long long at = start + SERVING_PERIOD_MS;
        until.tv_sec = (time_t)(at / 1000);
        until.tv_nsec = (long)(at % 1000) * 1000000L;
        pthread_mutex_lock(&s->mu);
        while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &until) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int serving_status(const serving *s)
{
    long long w = atomic_load_explicit(&((serving *)s)->word, memory_order_acquire);
    if (serving_now_ms() - (w >> 2) > SERVING_FRESH_MS)
        return STATUS_EUNAVAILABLE;
    int code = (int)(w & 3);
    return code == SERVING_UP           ? STATUS_OK
           : code == SERVING_NO_LIBRARY ? STATUS_EPROTO
                                        : STATUS_EUNAVAILABLE;
}

static void serving_free(serving *s)
{
    store_close(s->st);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int serving_start(const char *redis_url, const char *graph, serving **out, char *err, size_t errlen)
{
    *out = NULL;
    serving *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, errlen, "out of memory starting the health monitor (free some memory)");
        return -1;
    }
    pthread_condattr_t ca;
    bool cv_ok = pthread_condattr_init(&ca) == 0;
    cv_ok = cv_ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
            pthread_cond_init(&s->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!cv_ok || pthread_mutex_init(&s->mu, NULL) != 0) {
        if (cv_ok)
            pthread_cond_destroy(&s->cv);
        free(s);
        snprintf(err, errlen, "cannot create the health monitor's locks (free some resources)");
        return -1;
    }
    if (store_open(redis_url, graph, SERVING_FRESH_MS, &s->st) != STATUS_OK) {
        s->st = NULL;
        serving_free(s);
        snprintf(err, errlen,
                 "cannot connect the health monitor to Redis at %s (check that Redis runs and "
                 "--redis is right)",
                 redis_url);
        return -1;
    }
    /* A round trip that takes longer than the bound cannot give a fresh status anyway. */
    store_set_timeout(s->st, SERVING_FRESH_MS);
    serving_check(s);
    int rc = pthread_create(&s->thread, NULL, serving_main, s);
    if (rc != 0) {
        serving_free(s);
        snprintf(err, errlen, "cannot start the health monitor thread (check the process limits)");
        return -1;
    }
    *out = s;
    return 0;
}

void serving_stop(serving *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    serving_free(s);
}
