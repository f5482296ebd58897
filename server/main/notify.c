/*
 * notify.c - readiness and stopping notices to systemd through libsystemd's sd_notify (see
 * notify.h). Kept apart from main.c so the startup sequence reads as its phases and the unit's
 * Type=notify contract lives in one place.
 */
#include "main/notify.h"

#include <stdio.h>
#include <systemd/sd-daemon.h>

#include "core/status.h"

int notify_ready(const char *status)
{
    char msg[512];
    snprintf(msg, sizeof msg, "READY=1\nSTATUS=%s", status != NULL ? status : "serving");
    /* sd_notify: > 0 sent, 0 not supervised, < 0 a failure to reach the service manager. */
    return sd_notify(0, msg) < 0 ? STATUS_EUNAVAILABLE : STATUS_OK;
}

int notify_stopping(void)
{
    return sd_notify(0, "STOPPING=1\nSTATUS=finishing calls in flight") < 0 ? STATUS_EUNAVAILABLE
                                                                            : STATUS_OK;
}
