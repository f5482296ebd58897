/*
 * hostport.c - "HOST:PORT" or "PORT" normalised (see hostport.h).
 */
#include "core/hostport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int hostport_parse(const char *addr, char *out, size_t n)
{
    if (addr == NULL || addr[0] == '\0') {
        return -1;
    }
    const char *colon = strrchr(addr, ':');
    const char *port = colon != NULL ? colon + 1 : addr;
    size_t plen = strlen(port);
    if (plen == 0 || plen > 5 || strspn(port, "0123456789") != plen) {
        return -1;
    }
    long p = strtol(port, NULL, 10);
    if (p < 0 || p > 65535) {
        return -1;
    }
    int w;
    if (colon == NULL) {
        w = snprintf(out, n, "127.0.0.1:%ld", p);
    } else {
        if (colon == addr) {
            return -1;
        }
        w = snprintf(out, n, "%.*s:%ld", (int)(colon - addr), addr, p);
    }
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

void hostport_host_part(const char *hostport, char *out, size_t n)
{
    size_t len;
    if (hostport[0] == '[') {
        const char *end = strchr(hostport, ']');
        len = end != NULL ? (size_t)(end - hostport) + 1 : strlen(hostport);
    } else {
        const char *colon = strrchr(hostport, ':');
        len = colon != NULL ? (size_t)(colon - hostport) : strlen(hostport);
    }
    if (len >= n) {
        len = n - 1;
    }
    memcpy(out, hostport, len);
    out[len] = '\0';
}

int hostport_names_server(const char *host, const char *listen_host, const char *allow_host)
{
    if (host == NULL) {
        return 0;
    }
    char h[256];
    hostport_host_part(host, h, sizeof h);
    return strcasecmp(h, "127.0.0.1") == 0 || strcasecmp(h, "localhost") == 0 ||
           strcmp(h, "[::1]") == 0 || strcasecmp(h, listen_host) == 0 ||
           (allow_host != NULL && strcasecmp(h, allow_host) == 0);
}
