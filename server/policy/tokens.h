/*
 * tokens.h - whether a text holds a value as a whole token: the containment Gate/Invoke checks
 * a quoted, task or lineage value by (docs/workflows.md "Value lineage").
 */
#ifndef CHARTER_TOKENS_H
#define CHARTER_TOKENS_H

#include <stdbool.h>

/* True when text holds value as a whole token: an occurrence of its bytes bounded on each side
 * by the start or end of text, or by a character that is neither a token character (a letter,
 * a digit, a byte of a multi-byte character) nor one of "-_.@/+," between two token
 * characters. "7731" is no token of "INV-7731", nor "2013000" of "DE89370400440532013000";
 * "DE89370400440532013000" is one of "IBAN DE89370400440532013000.". False for a NULL text or
 * an empty value. */
bool token_holds(const char *text, const char *value);

#endif
