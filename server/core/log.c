/*
 * log.c - charterd's stderr log (see log.h).
 *
 * Each line is formatted into one buffer and written with one write(2): POSIX keeps writes of
 * a few hundred bytes to a pipe or file atomic, so worker threads need no lock to log. Only
 * the counters of refused calls, shared by every thread that refuses, have a lock.
 */
#include "core/log.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool log_quiet_flag;
static bool log_verbose_flag;
static bool log_json_flag;
static _Thread_local const log_call_fields *log_call_now;

void log_set_json(bool json)
{
    log_json_flag = json;
}

void log_set_call(const log_call_fields *f)
{
    log_call_now = f;
}

void log_init(bool quiet, bool verbose)
{
    log_quiet_flag = quiet;
    log_verbose_flag = verbose;
}

bool log_verbose(void)
{
    return log_verbose_flag;
}

static void log_write_level(bool stamped, const char *level, const char *fmt, va_list ap);

static void log_out(const char *line, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t r = write(STDERR_FILENO, line + off, n - off);
        if (r <= 0) {
            break; /* stderr is gone; nothing better to do with a log line */
        }
        off += (size_t)r;
    }
}

/* One JSON object and a newline, in one write; false when it could not be built (the caller
 * then writes the text line). */
static bool log_write_json(const char *level, const char *fmt, va_list ap)
{
    char msg[1024], when[40] = "";
    vsnprintf(msg, sizeof msg, fmt, ap);
    struct timespec ts;
    struct tm tm;
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0 && gmtime_r(&ts.tv_sec, &tm) != NULL) {
        size_t k = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(when + k, sizeof when - k, ".%03ldZ", ts.tv_nsec / 1000000L);
    }
    json_t *o = json_object();
    if (o == NULL) {
        return false;
    }
    int bad = json_object_set_new(o, "time", json_string(when));
    bad |= json_object_set_new(o, "level", json_string(level));
    /* Invalid UTF-8 from a caller's text becomes '?' rather than losing the line. */
    for (char *p = msg; *p != '\0'; p++) {
        if ((unsigned char)*p >= 0x80) {
            *p = '?';
        }
    }
    bad |= json_object_set_new(o, "message", json_string(msg));
    const log_call_fields *f = log_call_now;
    if (f != NULL) {
        bad |= json_object_set_new(o, "method", json_string(f->method ? f->method : ""));
        bad |= json_object_set_new(o, "code", json_string(f->code ? f->code : ""));
        bad |= json_object_set_new(o, "duration_us", json_integer(f->duration_us));
        bad |= json_object_set_new(o, "tenant", json_string(f->tenant ? f->tenant : ""));
        bad |=
            json_object_set_new(o, "request_id", json_string(f->request_id ? f->request_id : ""));
    }
    char *text = bad == 0 ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text == NULL) {
        return false;
    }
    size_t n = strlen(text);
    char *line = malloc(n + 1);
    if (line == NULL) {
        free(text);
        return false;
    }
    memcpy(line, text, n);
    line[n] = '\n';
    log_out(line, n + 1);
    free(line);
    free(text);
    return true;
}

/* Writes prefix + message + newline; a message longer than the buffer is cut, never split. */
static void log_write(bool stamped, const char *fmt, va_list ap)
{
    log_write_level(stamped, "info", fmt, ap);
}

static void log_write_level(bool stamped, const char *level, const char *fmt, va_list ap)
{
    if (stamped && log_json_flag) {
        va_list aq;
        va_copy(aq, ap);
        bool done = log_write_json(level, fmt, aq);
        va_end(aq);
        if (done) {
            return;
        }
    }
    char line[1024];
    size_t n = 0;

    if (stamped) {
        struct timespec ts;
        struct tm tm;
        if (clock_gettime(CLOCK_REALTIME, &ts) == 0 && gmtime_r(&ts.tv_sec, &tm) != NULL) {
            n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
            int w = snprintf(line + n, sizeof line - n, ".%03ldZ ", ts.tv_nsec / 1000000L);
            if (w > 0) {
                n += (size_t)w;
            }
        }
    }
    int w = snprintf(line + n, sizeof line - n, "charterd: ");
    if (w > 0) {
        n += (size_t)w;
    }
    w = vsnprintf(line + n, sizeof line - n, fmt, ap);
    if (w > 0) {
        n += (size_t)w;
    }
    if (n > sizeof line - 2) {
        n = sizeof line - 2;
    }
    /* A message never spans lines: a newline inside it would look like a second event. */
    for (size_t i = 0; i < n; i++) {
        if (line[i] == '\n' || line[i] == '\r') {
            line[i] = ' ';
        }
    }
    line[n++] = '\n';
    log_out(line, n);
}

void log_info(const char *fmt, ...)
{
    if (log_quiet_flag) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    log_write(true, fmt, ap);
    va_end(ap);
}

void log_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_write_level(true, "error", fmt, ap);
    va_end(ap);
}

void log_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_write(false, fmt, ap);
    va_end(ap);
}

/* --- refused calls, counted per code per second ---------------------------------------- */

#define LOG_CODES 17 /* gRPC status numbers 0..16 */

static pthread_mutex_t log_refusal_mu = PTHREAD_MUTEX_INITIALIZER;
static time_t log_refusal_second;                 /* the second being counted */
static unsigned log_refusal_written;              /* full lines written in it */
static unsigned long log_refusal_held[LOG_CODES]; /* refusals counted, not yet summarized */
static const char *log_refusal_names[LOG_CODES];  /* each code's name, as last given */
static time_t log_refusal_since;                  /* first second with a held refusal */

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void log_line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_write_level(true, "warn", fmt, ap);
    va_end(ap);
}

/* Formats the summary of held refusals into line (n bytes) and clears them; returns false
 * when none were held. Called with log_refusal_mu held. */
static bool log_refusal_summary(char *line, size_t n)
{
    unsigned long total = 0;
    for (int i = 0; i < LOG_CODES; i++) {
        total += log_refusal_held[i];
    }
    if (total == 0) {
        return false;
    }
    struct tm tm;
    char since[16] = "?";
    if (gmtime_r(&log_refusal_since, &tm) != NULL) {
        strftime(since, sizeof since, "%H:%M:%S", &tm);
    }
    int w = snprintf(line, n, "%lu more refused calls not logged since %sZ:", total, since);
    size_t off = w > 0 && (size_t)w < n ? (size_t)w : 0;
    const char *sep = " ";
    for (int i = 0; i < LOG_CODES && off < n; i++) {
        if (log_refusal_held[i] == 0) {
            continue;
        }
        w = snprintf(line + off, n - off, "%s%s %lu", sep,
                     log_refusal_names[i] != NULL ? log_refusal_names[i] : "?",
                     log_refusal_held[i]);
        off = w > 0 && (size_t)w < n - off ? off + (size_t)w : n;
        sep = ", ";
    }
    memset(log_refusal_held, 0, sizeof log_refusal_held);
    return true;
}

void log_refusal(int code, const char *name, const char *fmt, ...)
{
    char summary[512];
    bool have_summary = false;
    bool write_full = false;
    time_t now = time(NULL);
    int slot = code >= 0 && code < LOG_CODES ? code : 2; /* 2: gRPC UNKNOWN */

    pthread_mutex_lock(&log_refusal_mu);
    if (now != log_refusal_second) {
        have_summary = log_refusal_summary(summary, sizeof summary);
        log_refusal_second = now;
        log_refusal_written = 0;
    }
    if (log_refusal_written < LOG_REFUSALS_PER_SECOND) {
        log_refusal_written++;
        write_full = true;
    } else {
        bool none = true;
        for (int i = 0; i < LOG_CODES; i++) {
            none = none && log_refusal_held[i] == 0;
        }
        if (none) {
            log_refusal_since = now;
        }
        log_refusal_held[slot]++;
        log_refusal_names[slot] = name;
    }
    pthread_mutex_unlock(&log_refusal_mu);

    if (have_summary) {
        log_line("%s", summary);
    }
    if (write_full) {
        va_list ap;
        va_start(ap, fmt);
        log_write_level(true, "warn", fmt, ap);
        va_end(ap);
    }
}

void log_refusal_flush(void)
{
    char summary[512];
    pthread_mutex_lock(&log_refusal_mu);
    bool have_summary = log_refusal_summary(summary, sizeof summary);
    pthread_mutex_unlock(&log_refusal_mu);
    if (have_summary) {
        log_line("%s", summary);
    }
}
