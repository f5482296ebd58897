/*
 * hostport.h - a listen address given as "HOST:PORT" or "PORT", normalised.
 *
 * Read by the option parser (--http) and by the HTTP listener and the startup checks that bind
 * it, so all three agree on what an address means; and the check that a request's Host names
 * this server, shared by HTTP/1.1 and HTTP/2.
 */
#ifndef CHARTER_HOSTPORT_H
#define CHARTER_HOSTPORT_H

#include <stddef.h>

/* addr normalised as "HOST:PORT" into out (n bytes); "PORT" alone means 127.0.0.1. Returns 0,
 * or -1 when addr is not "HOST:PORT" or "PORT" with a port of 0 to 65535, or out is too small.
 * Port 0 asks the system for a free port when the address is bound. */
int hostport_parse(const char *addr, char *out, size_t n);

/* The host part of "host[:port]" or "[v6]:port" (a Host header, an HTTP/2 :authority) into out
 * (n bytes, cut to fit). */
void hostport_host_part(const char *hostport, char *out, size_t n);

/* Whether a Host header or :authority names this server: a loopback name (127.0.0.1,
 * localhost, [::1]), the host listened on, or allow_host (NULL: none). Anything else may be a
 * DNS-rebinding page. NULL host is false. Both HTTP surfaces (HTTP/1.1 and HTTP/2) ask here. */
int hostport_names_server(const char *host, const char *listen_host, const char *allow_host);

#endif
