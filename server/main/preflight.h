/*
 * preflight.h - checks made before charterd changes anything on disk or starts a process: is
 * every listen address free? A second charterd whose port is taken must fail in one line before
 * it creates a data folder or starts an embedded redis-server.
 */
#ifndef CHARTER_PREFLIGHT_H
#define CHARTER_PREFLIGHT_H

#include <stddef.h>

#include "main/config.h"

/* Probes every --listen address of cfg (the default TCP address when none was given): a tcp://
 * address is bound once and released, an ipc:// socket file is connected to. Writes one line
 * "<what> (<how to fix>)" to err (errlen bytes) on failure. Errors other than "in use" (an
 * unknown host, a folder that does not exist yet) are left to the transport, which reports them
 * when it listens. Returns 0 when no address is taken, STATUS_EEXISTS when one is. */
int preflight_listen(const config *cfg, char *err, size_t errlen);

#endif
