/*
 * summary_seal.c - the seal of a lineage summary (see summary_seal.h). The MAC itself is
 * integrity.c's: this file only fixes the text the seal covers, so the gates that seal and
 * check summaries and the audit that checks them all cover the same bytes.
 */
#include "evidence/summary_seal.h"

#include <stdio.h>
#include <string.h>

#include "core/status.h"
#include "evidence/integrity.h"

/* The text a summary's seal is the HMAC of; its length, or -1 when it does not fit. */
static int seal_text(const char *id, const char *summary_hash, char *buf, size_t n)
{
    if (id == NULL || summary_hash == NULL || *id == '\0' || *summary_hash == '\0')
        return -1;
    int w = snprintf(buf, n, "charter-summary-1\n%s\n%s\n", id, summary_hash);
    return w > 0 && (size_t)w < n ? w : -1;
}

int summary_seal_make(const char *id, const char *summary_hash, char mac[65])
{
    char text[400];
    mac[0] = '\0';
    if (!integrity_keyed())
        return STATUS_ENOKEY;
    int len = seal_text(id, summary_hash, text, sizeof text);
    if (len < 0)
        return STATUS_EINVAL;
    return integrity_mac(text, (size_t)len, mac);
}

int summary_seal_check(const char *id, const char *summary_hash, const char *seal)
{
    char text[400];
    if (!integrity_keyed())
        return STATUS_ENOKEY;
    int len = seal_text(id, summary_hash, text, sizeof text);
    if (len < 0)
        return STATUS_EINVAL;
    if (seal == NULL || *seal == '\0')
        return STATUS_EREFUSED;
    return integrity_mac_verify(text, (size_t)len, seal);
}
