/*
 * archive.c - writing and reading the archive file (archive.h, docs/archive.md).
 *
 * The writer appends whole lines to "<path>.partial" with write(2), so a crash leaves at worst
 * a partial file the next writer replaces; only archive_finish names the file, after fsync of
 * the file and of its folder. The reader trusts nothing before it checked it: a line's digest
 * before its JSON is decoded, its place before it is visited.
 */
#include "evidence/archive.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/digest.h"
#include "core/status.h"

struct archive_writer {
    int fd;
    uint64_t n;        /* records written */
    uint64_t bytes;    /* bytes written */
    EVP_MD_CTX *chain; /* SHA-256 over each record's line digest and "\n" */
    char path[PATH_MAX];
    char partial[PATH_MAX + 16];
};

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return STATUS_EUNAVAILABLE;
        p += w;
        n -= (size_t)w;
    }
    return STATUS_OK;
}

/* One line: "<sha256 of text> <text>\n", its digest added to the chain. A line the reader
 * would refuse (past ARCHIVE_LINE_MAX) is not written. */
static int append_line(archive_writer *w, const char *text)
{
    size_t len = strlen(text);
    if (len > ARCHIVE_LINE_MAX - 66)
        return STATUS_EINVAL;
    char *line = malloc(len + 67);
    if (line == NULL)
        return STATUS_ENOMEM;
    if (digest_sha256_hex(text, len, line) != 0) {
        free(line);
        return STATUS_ENOMEM;
    }
    line[64] = ' ';
    memcpy(line + 65, text, len);
    line[65 + len] = '\n';
    int rc = EVP_DigestUpdate(w->chain, line, 64) == 1 && EVP_DigestUpdate(w->chain, "\n", 1) == 1
                 ? STATUS_OK
                 : STATUS_ENOMEM;
    if (rc == STATUS_OK)
        rc = write_all(w->fd, line, len + 66);
    if (rc == STATUS_OK)
        w->bytes += len + 66;
    free(line);
    return rc;
}

int archive_append(archive_writer *w, const char *kind, const json_t *body)
{
    json_t *rec = json_pack("{s:I, s:s, s:O}", "n", (json_int_t)(w->n + 1), "kind", kind, "body",
                            (json_t *)body);
    char *text = rec ? json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(rec);
    if (text == NULL)
        return STATUS_ENOMEM;
    int rc = append_line(w, text);
    free(text);
    if (rc == STATUS_OK)
        w->n++;
    return rc;
}

static void writer_free(archive_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    EVP_MD_CTX_free(w->chain);
    free(w);
}

int archive_create(const char *path, const json_t *manifest, archive_writer **out)
{
    *out = NULL;
    if (path == NULL || *path == '\0' || strlen(path) >= PATH_MAX)
        return STATUS_EINVAL;
    archive_writer *w = calloc(1, sizeof *w);
    if (w == NULL)
        return STATUS_ENOMEM;
    w->fd = -1;
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->partial, sizeof w->partial, "%s.partial", path);
    w->chain = EVP_MD_CTX_new();
    if (w->chain == NULL || EVP_DigestInit_ex(w->chain, EVP_sha256(), NULL) != 1) {
        writer_free(w);
        return STATUS_ENOMEM;
    }
    w->fd = open(w->partial, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (w->fd < 0) {
        writer_free(w);
        return STATUS_EUNAVAILABLE;
    }
    int rc = archive_append(w, "manifest", manifest);
    if (rc != STATUS_OK) {
        archive_abandon(w);
        return rc;
    }
    *out = w;
    return STATUS_OK;
}

void archive_abandon(archive_writer *w)
{
    if (w == NULL)
        return;
    unlink(w->partial);
    writer_free(w);
}

/* fsync of the folder that holds path, so the rename that named the file is on disk too. */
static int sync_folder(const char *path)
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return STATUS_EUNAVAILABLE;
    int rc = fsync(fd) == 0 ? STATUS_OK : STATUS_EUNAVAILABLE;
    close(fd);
    return rc;
}

int archive_finish(archive_writer *w, uint64_t *bytes)
{
    unsigned char md[32];
    unsigned int mdlen = 0;
    char digest[65];
    int rc = EVP_DigestFinal_ex(w->chain, md, &mdlen) == 1 ? STATUS_OK : STATUS_ENOMEM;
    json_t *end = NULL;
    if (rc == STATUS_OK) {
        digest_hex(md, mdlen, digest);
        end = json_pack("{s:I, s:s}", "records", (json_int_t)w->n, "digest", digest);
        rc = end ? archive_append(w, "end", end) : STATUS_ENOMEM;
    }
    json_decref(end);
    if (rc == STATUS_OK && fsync(w->fd) != 0)
        rc = STATUS_EUNAVAILABLE;
    if (rc == STATUS_OK && rename(w->partial, w->path) != 0)
        rc = STATUS_EUNAVAILABLE;
    if (rc == STATUS_OK)
        rc = sync_folder(w->path);
    if (rc != STATUS_OK) {
        archive_abandon(w);
        return rc;
    }
    if (bytes)
        *bytes = w->bytes;
    writer_free(w);
    return STATUS_OK;
}

/* --- reading ------------------------------------------------------------------------------ */

typedef struct {
    FILE *f;
    char *line;
    size_t cap;
    uint64_t lineno, offset;
    EVP_MD_CTX *chain;
    bool ended;
} reader;

static int bad(archive_check *out, const reader *r, const char *fmt, const char *detail)
{
    out->intact = false;
    out->bad_line = r->lineno;
    out->bad_offset = r->offset;
    char what[200];
    snprintf(what, sizeof what, fmt, detail ? detail : "");
    snprintf(out->problem, sizeof out->problem, "line %llu (byte %llu): %s",
             (unsigned long long)r->lineno, (unsigned long long)r->offset, what);
    return STATUS_OK;
}

ssize_t archive_read_line(FILE *f, char **line, size_t *cap)
{
    size_t len = 0;
    int c = 0;
    flockfile(f);
    while (c != '\n' && (c = getc_unlocked(f)) != EOF) {
        if (len + 2 > *cap) {
            size_t grow = *cap == 0 ? 4096 : *cap * 2;
            grow = grow > ARCHIVE_LINE_MAX + 1 ? ARCHIVE_LINE_MAX + 1 : grow;
            char *grown = len + 2 > grow ? NULL : realloc(*line, grow);
            if (grown == NULL) {
                funlockfile(f);
                return len + 2 > grow ? -2 : -1;
            }
            *line = grown;
            *cap = grow;
        }
        (*line)[len++] = (char)c;
    }
    funlockfile(f);
    if (len > 0)
        (*line)[len] = '\0';
    return ferror(f) ? -1 : (ssize_t)len;
}

/* The end record: its count and digest against what was read before it. */
static int check_end(reader *r, const json_t *body, archive_check *out)
{
    unsigned char md[32];
    unsigned int mdlen = 0;
    char digest[65];
    if (EVP_DigestFinal_ex(r->chain, md, &mdlen) != 1)
        return STATUS_ENOMEM;
    digest_hex(md, mdlen, digest);
    json_int_t n = json_integer_value(json_object_get(body, "records"));
    const char *d = json_string_value(json_object_get(body, "digest"));
    r->ended = true;
    if ((uint64_t)n != r->lineno - 1)
        return bad(out, r, "the end record counts %s records other than the ones before it", NULL);
    if (d == NULL || strcmp(d, digest) != 0)
        return bad(out, r, "the end record's digest does not match the records before it%s", NULL);
    return STATUS_OK;
}

/* Checks the line just read (len bytes, without its newline) and visits its record. */
static int check_line(reader *r, size_t len, archive_visit visit, void *ctx, archive_check *out)
{
    char hex[65];
    if (len < 66 || r->line[64] != ' ' || !digest_is_hex(r->line, 64))
        return bad(out, r, "not a record line (\"<sha256> <json>\")%s", NULL);
    if (digest_sha256_hex(r->line + 65, len - 65, hex) != 0)
        return STATUS_ENOMEM;
    if (memcmp(hex, r->line, 64) != 0)
        return bad(out, r, "its SHA-256 does not match its bytes (the record was altered)%s", NULL);
    json_t *rec = json_loadb(r->line + 65, len - 65, JSON_REJECT_DUPLICATES, NULL);
    const char *kind = json_string_value(json_object_get(rec, "kind"));
    json_t *body = json_object_get(rec, "body");
    int rc = STATUS_OK;
    if (kind == NULL || !json_is_object(body))
        rc = bad(out, r, "not a record {n,kind,body}%s", NULL);
    else if ((uint64_t)json_integer_value(json_object_get(rec, "n")) != r->lineno)
        rc = bad(out, r, "its place is not %s (a record was removed, moved or added)", "its line");
    else if (r->lineno == 1 && strcmp(kind, "manifest") != 0)
        rc = bad(out, r, "the first record is no manifest%s", NULL);
    else if (strcmp(kind, "end") == 0)
        rc = check_end(r, body, out);
    else if (EVP_DigestUpdate(r->chain, r->line, 64) != 1 ||
             EVP_DigestUpdate(r->chain, "\n", 1) != 1)
        rc = STATUS_ENOMEM;
    else if (visit)
        rc = visit(ctx, r->lineno, kind, body);
    json_decref(rec);
    return rc;
}

int archive_read(const char *path, archive_visit visit, void *ctx, archive_check *out)
{
    memset(out, 0, sizeof *out);
    out->intact = true;
    reader r = {0};
    r.f = fopen(path, "rb");
    if (r.f == NULL)
        return errno == ENOENT ? STATUS_ENOTFOUND : STATUS_EUNAVAILABLE;
    r.chain = EVP_MD_CTX_new();
    int rc =
        r.chain && EVP_DigestInit_ex(r.chain, EVP_sha256(), NULL) == 1 ? STATUS_OK : STATUS_ENOMEM;
    ssize_t got;
    while (rc == STATUS_OK && out->intact && (got = archive_read_line(r.f, &r.line, &r.cap)) != 0) {
        r.lineno++;
        if (got == -1) {
            rc = errno == ENOMEM ? STATUS_ENOMEM : STATUS_EUNAVAILABLE;
            break;
        }
        if (got == -2) {
            char most[32];
            snprintf(most, sizeof most, "%zu", ARCHIVE_LINE_MAX);
            rc = bad(out, &r, "the line is longer than any record (more than %s bytes)", most);
            break;
        }
        if (r.ended) {
            rc = bad(out, &r, "a record follows the end record%s", NULL);
            break;
        }
        bool newline = got > 0 && r.line[got - 1] == '\n';
        if (!newline)
            rc = bad(out, &r, "the line is cut short (no newline)%s", NULL);
        else
            rc = check_line(&r, (size_t)got - 1, visit, ctx, out);
        r.offset += (uint64_t)got;
        if (rc == STATUS_OK && out->intact)
            out->records++;
    }
    if (rc == STATUS_OK && ferror(r.f))
        rc = STATUS_EUNAVAILABLE;
    if (rc == STATUS_OK && out->intact && !r.ended) {
        r.lineno++;
        bad(out, &r, "the file ends without its end record (cut short)%s", NULL);
    }
    free(r.line);
    EVP_MD_CTX_free(r.chain);
    fclose(r.f);
    return rc;
}

int archive_send_digest(const char *context_id, const char *payload_id, const char *recipient,
                        const char *tool, char hex[65])
{
    const char *parts[4] = {context_id, payload_id, recipient, tool};
    char buf[1024];
    size_t at = 0;
    at += (size_t)snprintf(buf, sizeof buf, "charter-send-1\n");
    for (int i = 0; i < 4; i++) {
        const char *p = parts[i] ? parts[i] : "";
        int k = snprintf(buf + at, sizeof buf - at, "%zu:%s\n", strlen(p), p);
        if (k < 0 || (size_t)k >= sizeof buf - at)
            return STATUS_EINVAL;
        at += (size_t)k;
    }
    return digest_sha256_hex(buf, at, hex) == 0 ? STATUS_OK : STATUS_ENOMEM;
}
