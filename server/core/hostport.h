/*
 * hostport.h - a listen address given as "HOST:PORT" or "PORT", normalised.
 *
 * Read by the option parser (--http) and by the HTTP listener and the startup checks that bind
 * it, so all three agree on what an address means.
 */
#ifndef CHARTER_HOSTPORT_H
#define CHARTER_HOSTPORT_H

#include <stddef.h>

/* addr normalised as "HOST:PORT" into out (n bytes); "PORT" alone means 127.0.0.1. Returns 0,
 * or -1 when addr is not "HOST:PORT" or "PORT" with a port of 1 to 65535, or out is too small. */
int hostport_parse(const char *addr, char *out, size_t n);

#endif
