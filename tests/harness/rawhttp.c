/*
 * rawhttp.c - a raw HTTP/1.1 client for the HTTP listeners' suites (see harness.h): requests
 * are the exact bytes a test writes, so a test can send headers without their body, trickle a
 * request byte by byte, or hold a connection open, which curl and the SDKs cannot.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int harness_http_connect(const char *hostport)
{
    const char *colon = strrchr(hostport, ':');
    if (colon == NULL) {
        return -1;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)atoi(colon + 1));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int harness_http_send(int fd, const char *text, size_t len)
{
    while (len > 0) {
        ssize_t k = send(fd, text, len, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            return -1;
        }
        text += k;
        len -= (size_t)k;
    }
    return 0;
}

bool harness_http_readable(int fd, int wait_ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    int rc;
    while ((rc = poll(&p, 1, wait_ms)) < 0 && errno == EINTR) {
    }
    return rc > 0;
}

static long long rawhttp_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Whether buf (got bytes) holds a whole response: its head and Content-Length bytes of body. */
static bool rawhttp_whole(const char *buf, size_t got)
{
    const char *end = strstr(buf, "\r\n\r\n");
    if (end == NULL) {
        return false;
    }
    size_t head = (size_t)(end - buf) + 4;
    size_t want = 0;
    /* end is a line end, so every line before it has one. */
    for (const char *p = buf; p < end; p = strstr(p, "\r\n") + 2) {
        if (strncasecmp(p, "Content-Length:", 15) == 0) {
            want = strtoul(p + 15, NULL, 10);
        }
    }
    return got >= head + want;
}

int harness_http_response(int fd, int wait_ms, char *body, size_t n)
{
    return harness_http_read(fd, wait_ms, NULL, 0, body, n);
}

int harness_http_read(int fd, int wait_ms, char *head, size_t head_n, char *body, size_t n)
{
    char buf[65536];
    size_t got = 0;
    bool closed = false;
    long long deadline = rawhttp_now_ms() + wait_ms;
    if (n > 0) {
        body[0] = '\0';
    }
    if (head_n > 0) {
        head[0] = '\0';
    }
    while (got + 1 < sizeof buf && !closed) {
        buf[got] = '\0';
        if (rawhttp_whole(buf, got)) {
            break;
        }
        long long left = deadline - rawhttp_now_ms();
        if (left <= 0 || !harness_http_readable(fd, (int)left)) {
            break;
        }
        ssize_t k = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            closed = true;
        } else {
            got += (size_t)k;
        }
    }
    buf[got] = '\0';
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) {
        return 0;
    }
    const char *end = strstr(buf, "\r\n\r\n");
    if (end != NULL && n > 0) {
        snprintf(body, n, "%s", end + 4);
    }
    if (end != NULL && head_n > 0) {
        snprintf(head, head_n, "%.*s", (int)(end - buf) + 2, buf);
    }
    return status;
}

int harness_http_trickle(int fd, const char *bytes, int every_ms, int max, bool *answered)
{
    *answered = false;
    size_t nb = strlen(bytes);
    for (int i = 0; i < max; i++) {
        if (harness_http_readable(fd, 0)) {
            char c;
            ssize_t k = recv(fd, &c, 1, 0);
            if (k > 0) {
                *answered = true;
            }
            return i;
        }
        if (harness_http_send(fd, bytes + (size_t)i % nb, 1) != 0) {
            return i;
        }
        harness_sleep_ms(every_ms);
    }
    return harness_http_readable(fd, 0) ? max : -1;
}

void harness_http_header(const char *head, const char *name, char *out, size_t n)
{
    size_t len = strlen(name);
    out[0] = '\0';
    for (const char *p = strstr(head, "\r\n"); p != NULL; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, len) == 0 && line[len] == ':') {
            const char *v = line + len + 1;
            while (*v == ' ') {
                v++;
            }
            snprintf(out, n, "%.*s", (int)strcspn(v, "\r\n"), v);
            return;
        }
    }
}
