/*
 * hostport.c - "HOST:PORT" or "PORT" normalised (see hostport.h).
 */
#include "core/hostport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (p < 1 || p > 65535) {
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
