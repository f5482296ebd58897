/*
 * archive.h - the archive file: a run's evidence after it leaves Redis (docs/archive.md).
 *
 * One file per run, append-only, one record a line: "<sha256> <json>\n", the SHA-256 in hex
 * of the JSON bytes of that line. Each record is {"n":<1-based place>,"kind":"<kind>",
 * "body":{...}}; the first is the manifest, the last the end record {"records":<n before it>,
 * "digest":<SHA-256 of the records' line digests, in order, each followed by "\n">}. So a byte
 * changed names its line, a line removed, moved or added breaks the places and the digest, and
 * a file cut short has no end record. A file is written under "<path>.partial" and renamed into
 * place only once it is complete and on disk (archive_finish): a name that exists is a whole
 * archive.
 */
#ifndef CHARTER_ARCHIVE_H
#define CHARTER_ARCHIVE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* The manifest's "format": what a reader of this build accepts. */
#define ARCHIVE_FORMAT "charter-archive-1"
/* The longest line (record, digest and newline) the writer writes and the reader reads, bytes.
 * Far above any record: an artifact's content is at most 1 MiB (limits.h), at most six times
 * that JSON-escaped. The reader stops at it, so a damaged or hostile file (one with no newline,
 * /dev/zero) is refused instead of held in memory whole. */
#define ARCHIVE_LINE_MAX ((size_t)64 * 1024 * 1024)

typedef struct archive_writer archive_writer;

/* Creates "<path>.partial" (mode 0600; an existing one from a writer that died is replaced) and
 * writes the manifest record (borrowed). Returns STATUS_OK with *out, STATUS_EINVAL (path
 * empty or too long), STATUS_EUNAVAILABLE (the file cannot be created or written: errno
 * tells), STATUS_ENOMEM. */
int archive_create(const char *path, const json_t *manifest, archive_writer **out);

/* Appends one record of kind (an id: "run", "event", ...) with body (borrowed). Returns
 * STATUS_OK, STATUS_EUNAVAILABLE (a write failed), STATUS_ENOMEM. */
int archive_append(archive_writer *w, const char *kind, const json_t *body);

/* Writes the end record, flushes the file to disk (fsync), renames it to its path and flushes
 * the folder, then frees w. bytes (may be NULL) gets the file's size. Returns STATUS_OK or
 * STATUS_EUNAVAILABLE (the partial file is removed); w is freed in every case. */
int archive_finish(archive_writer *w, uint64_t *bytes);

/* Closes and removes the partial file and frees w. NULL is a no-op. */
void archive_abandon(archive_writer *w);

/* Visits one record: its place (1-based), kind and body (borrowed for the call). Returns 0 to
 * go on; anything else stops the read, which returns it. */
typedef int (*archive_visit)(void *ctx, uint64_t n, const char *kind, const json_t *body);

typedef struct {
    bool intact;
    uint64_t records;    /* records read and checked (manifest and end record included) */
    uint64_t bad_line;   /* the first line that does not hold (1-based), 0 when intact */
    uint64_t bad_offset; /* its byte offset in the file */
    char problem[256];   /* "" when intact, else what is wrong, naming the line */
} archive_check;

/* Reads path record by record, checking each line's SHA-256, its place and, at the end, the end
 * record's count and digest; visit (may be NULL) is called for each record that holds, the
 * manifest first, the end record not. Returns STATUS_OK with *out filled (intact or not; a
 * record that does not hold stops the read and is named in out->problem), STATUS_ENOTFOUND
 * (no such file), STATUS_EUNAVAILABLE (a read failed), STATUS_ENOMEM, or what visit returned
 * when it stopped the read. */
int archive_read(const char *path, archive_visit visit, void *ctx, archive_check *out);

/* The next line of f into *line (grown as needed, *cap its size; the caller frees it), its
 * newline kept when it has one and a NUL after it: the bytes read, 0 at the end of the file,
 * -1 when a read failed or memory ran out (errno says which), -2 when the line goes past
 * ARCHIVE_LINE_MAX (the rest of it is left unread). For the archive and its index, whose
 * lines getline would hold at any length. */
ssize_t archive_read_line(FILE *f, char **line, size_t *cap);

/* The digest an archived run keeps of one send (hex SHA-256 over the length-prefixed context,
 * payload, recipient and tool): a retry of an archived invocation with the same request is
 * acknowledged, with another one a conflict (DESIGN.md "Delivery protocol"). */
int archive_send_digest(const char *context_id, const char *payload_id, const char *recipient,
                        const char *tool, char hex[65]);

#endif
