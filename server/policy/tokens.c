/*
 * tokens.c - whether a text holds a value as a whole token (tokens.h).
 */
#include "policy/tokens.h"

#include <string.h>

/* A character a token is made of: a letter, a digit, or a byte of a multi-byte character. */
static bool token_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c >= 0x80;
}

/* Punctuation that joins two token characters into one token: "INV-7731", "84.20",
 * "ann@corp.example". Before a space or the end it is punctuation again ("... 3000."). */
static bool joins(char c)
{
    return c != '\0' && strchr("-_.@/+,", c) != NULL;
}

/* Whether the occurrence at [at, at + n) of text is bounded on both sides. */
static bool bounded(const char *text, const char *at, size_t n)
{
    const unsigned char *t = (const unsigned char *)text, *a = (const unsigned char *)at;
    bool left =
        a == t || (!token_char(a[-1]) && !(joins((char)a[-1]) && a - 1 > t && token_char(a[-2])));
    bool right =
        a[n] == '\0' || (!token_char(a[n]) && !(joins((char)a[n]) && token_char(a[n + 1])));
    return left && right;
}

bool token_holds(const char *text, const char *value)
{
    size_t n = value != NULL ? strlen(value) : 0;
    if (text == NULL || n == 0)
        return false;
    for (const char *at = strstr(text, value); at != NULL; at = strstr(at + 1, value))
        if (bounded(text, at, n))
            return true;
    return false;
}
