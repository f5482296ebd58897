/*
 * checkpoint.h - a run's checkpoint as a token: the cursor an executor records before each
 * step (the next step, the artifacts each finished step hands on, the counters, the budget,
 * the workflow version and the graph), sealed with the integrity key so that a token the
 * database or a caller altered or made up is refused. The token is text a caller may keep in
 * a file: "ckpt1.<base64 of the cursor's JSON>.<hex HMAC-SHA256>", the MAC taken over
 * everything before the last dot. Without an integrity key nothing is sealed or opened.
 */
#ifndef CHARTER_CHECKPOINT_H
#define CHARTER_CHECKPOINT_H

#include <jansson.h>
#include <stddef.h>

/* The longest token accepted (the database's limit too, queries/checkpoints.lua). */
#define CHECKPOINT_TOKEN_MAX 1048576

/* Seals cursor (a JSON object; its text is written with sorted keys) into a token, malloc'd
 * into *token (caller frees). Returns STATUS_OK, STATUS_ENOKEY (no integrity key),
 * STATUS_ELIMIT (longer than CHECKPOINT_TOKEN_MAX), STATUS_ENOMEM or STATUS_EPROTO. */
int checkpoint_seal(const json_t *cursor, char **token);

/* Opens a token: checks its shape and its MAC, then decodes the cursor into *cursor (caller
 * decrefs). Returns STATUS_OK, STATUS_ENOKEY (no integrity key: nothing is checked),
 * STATUS_EINVAL (not a checkpoint token: shape, base64 or JSON), STATUS_EDENIED (the MAC does
 * not match: forged, altered, or sealed under another key), STATUS_ENOMEM or STATUS_EPROTO. */
int checkpoint_open(const char *token, json_t **cursor);

#endif
