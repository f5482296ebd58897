/*
 * log.c - charterd's stderr log (see log.h).
 *
 * Each line is formatted into one buffer and written with one write(2): POSIX keeps writes of
 * a few hundred bytes to a pipe or file atomic, so worker threads need no lock to log.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool log_quiet_flag;
static bool log_verbose_flag;

void log_init(bool quiet, bool verbose)
{
    log_quiet_flag = quiet;
    log_verbose_flag = verbose;
}

bool log_verbose(void)
{
    return log_verbose_flag;
}

/* Writes prefix + message + newline; a message longer than the buffer is cut, never split. */
static void log_write(bool stamped, const char *fmt, va_list ap)
{
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
    size_t off = 0;
    while (off < n) {
        ssize_t r = write(STDERR_FILENO, line + off, n - off);
        if (r <= 0) {
            break; /* stderr is gone; nothing better to do with a log line */
        }
        off += (size_t)r;
    }
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
    log_write(true, fmt, ap);
    va_end(ap);
}

void log_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_write(false, fmt, ap);
    va_end(ap);
}
