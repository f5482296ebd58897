/*
 * notify.h - tells the service manager (systemd, Type=notify) when charterd serves and when it
 * stops, so units ordered after charterd start only once it answers calls.
 */
#ifndef CHARTER_NOTIFY_H
#define CHARTER_NOTIFY_H

/* Sends READY=1 with a one-line STATUS once the transport listens. Outside systemd
 * ($NOTIFY_SOCKET unset) it does nothing. Returns 0 when sent or not supervised,
 * STATUS_EUNAVAILABLE when the service manager could not be told (charterd keeps serving: readiness
 * is advice). */
int notify_ready(const char *status);

/* Sends STOPPING=1 when charterd begins a graceful stop. Returns as notify_ready. */
int notify_stopping(void);

#endif
