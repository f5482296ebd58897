/*
 * preflight.c - listen addresses probed before startup has side effects (see preflight.h).
 *
 * The probe races with other processes (the address may be taken between the probe and the
 * transport's listen); the transport still reports that case. The probe only moves the common
 * case, a second charterd on the same port, ahead of the data folder and the embedded Redis.
 */
#include "main/preflight.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/hostport.h"
#include "core/status.h"

/* Splits "tcp://host:port" ("[v6]:port", ":port", "*:port") into host (NULL for any) and port.
 * Returns 0, or -1 for a form the transport will judge itself. */
static int preflight_split_tcp(const char *url, char *host, size_t hostlen, char *port,
                               size_t portlen, int *family)
{
    static const struct {
        const char *scheme;
        int family;
    } schemes[] = {{"tcp://", AF_UNSPEC}, {"tcp4://", AF_INET}, {"tcp6://", AF_INET6}};
    const char *h = NULL;
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        size_t n = strlen(schemes[i].scheme);
        if (strncmp(url, schemes[i].scheme, n) == 0) {
            h = url + n;
            *family = schemes[i].family;
            break;
        }
    }
    if (h == NULL) {
        return -1;
    }
    const char *colon;
    const char *start = h;
    size_t hlen;
    if (h[0] == '[') {
        const char *close = strchr(h, ']');
        if (close == NULL || close[1] != ':') {
            return -1;
        }
        start = h + 1;
        hlen = (size_t)(close - start);
        colon = close + 1;
    } else {
        colon = strrchr(h, ':');
        if (colon == NULL) {
            return -1;
        }
        hlen = (size_t)(colon - h);
    }
    if (hlen >= hostlen || strlen(colon + 1) == 0 || strlen(colon + 1) >= portlen) {
        return -1;
    }
    memcpy(host, start, hlen);
    host[hlen] = '\0';
    if (strcmp(host, "*") == 0) {
        host[0] = '\0';
    }
    snprintf(port, portlen, "%s", colon + 1);
    return 0;
}

/* 1 when some address of url is in use, 0 otherwise (free, or not judged here). */
static int preflight_tcp_in_use(const char *url)
{
    char host[256], port[16];
    int family = AF_UNSPEC;
    if (preflight_split_tcp(url, host, sizeof host, port, sizeof port, &family) != 0) {
        return 0;
    }
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    struct addrinfo *res = NULL;
    if (getaddrinfo(host[0] != '\0' ? host : NULL, port, &hints, &res) != 0) {
        return 0;
    }
    int in_use = 0;
    for (struct addrinfo *ai = res; ai != NULL && !in_use; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            continue;
        }
        /* As NNG sets it, so a port in TIME_WAIT is not mistaken for a taken one. */
        int one = 1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno == EADDRINUSE) {
            in_use = 1;
        }
        close(fd);
    }
    freeaddrinfo(res);
    return in_use;
}

/* 1 when a process accepts connections on the ipc:// socket file, 0 otherwise. */
static int preflight_ipc_in_use(const char *url)
{
    const char *path = url + strlen("ipc://");
    struct sockaddr_un sa;
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISSOCK(sb.st_mode) || strlen(path) >= sizeof sa.sun_path) {
        return 0;
    }
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return 0;
    }
    int live = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return live;
}

int preflight_listen(const config *cfg, char *err, size_t errlen)
{
    const char *fallback[1] = {CONFIG_DEFAULT_TCP_URL};
    const char *const *urls = (const char *const *)cfg->listen;
    size_t n = cfg->n_listen;
    if (n == 0) {
        urls = fallback;
        n = 1;
    }
    for (size_t i = 0; i < n; i++) {
        int taken = strncmp(urls[i], "ipc://", 6) == 0 ? preflight_ipc_in_use(urls[i])
                                                       : preflight_tcp_in_use(urls[i]);
        if (taken) {
            snprintf(err, errlen,
                     "cannot listen on %s: the address is in use (is another charterd running? "
                     "stop it, or pass another --listen)",
                     urls[i]);
            return STATUS_EEXISTS;
        }
    }
    /* The HTTP listener starts last; a taken port must still fail before anything is written. */
    char hp[300], url[320];
    if (cfg->http != NULL && hostport_parse(cfg->http, hp, sizeof hp) == 0) {
        snprintf(url, sizeof url, "tcp://%s", hp);
        if (preflight_tcp_in_use(url)) {
            snprintf(err, errlen,
                     "cannot serve HTTP on %s: the address is in use (is another charterd "
                     "running? stop it, or pass another --http)",
                     hp);
            return STATUS_EEXISTS;
        }
    }
    return STATUS_OK;
}
