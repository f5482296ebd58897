/*
 * ids.c - the id rules of the domain (see ids.h): a character class and a length, checked
 * byte by byte so no locale or regex library is involved.
 */
#include "core/ids.h"

#include <string.h>

static bool ids_chars_ok(const char *s, bool colon)
{
    size_t n = s != NULL ? strlen(s) : 0;
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-' ||
                  (colon && ch == ':');
        if (!ok)
            return false;
    }
    return true;
}

bool ids_graph_ok(const char *s)
{
    return ids_chars_ok(s, false);
}

bool ids_invocation_ok(const char *s)
{
    if (!ids_chars_ok(s, true))
        return false;
    /* P:delivery:<id>:to and :delivered are keys of the delivery <id>: an id whose last
     * colon-separated part is one of those words would name them (queries/validation.lua
     * check_invocation refuses it the same way). */
    const char *colon = strrchr(s, ':');
    const char *last = colon != NULL ? colon + 1 : s;
    return strcmp(last, "to") != 0 && strcmp(last, "delivered") != 0;
}
