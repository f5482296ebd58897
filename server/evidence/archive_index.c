/*
 * archive_index.c - the index of a graph's archive folder (archive_index.h).
 */
#include "evidence/archive_index.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/digest.h"
#include "core/status.h"
#include "evidence/archive.h"

/* Hex SHA-256 of the file at path and its size. Returns STATUS_OK, STATUS_ENOTFOUND,
 * STATUS_EUNAVAILABLE or STATUS_ENOMEM. */
static int file_sha256(const char *path, char hex[65], uint64_t *bytes)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return errno == ENOENT ? STATUS_ENOTFOUND : STATUS_EUNAVAILABLE;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int rc = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 ? STATUS_OK : STATUS_ENOMEM;
    unsigned char buf[65536];
    size_t got;
    *bytes = 0;
    while (rc == STATUS_OK && (got = fread(buf, 1, sizeof buf, f)) > 0) {
        *bytes += got;
        if (EVP_DigestUpdate(md, buf, got) != 1)
            rc = STATUS_ENOMEM;
    }
    if (rc == STATUS_OK && ferror(f))
        rc = STATUS_EUNAVAILABLE;
    unsigned char out[32];
    unsigned int n = 0;
    if (rc == STATUS_OK && EVP_DigestFinal_ex(md, out, &n) != 1)
        rc = STATUS_ENOMEM;
    if (rc == STATUS_OK)
        digest_hex(out, n, hex);
    EVP_MD_CTX_free(md);
    fclose(f);
    return rc;
}

/* The digest of the index's last line into prev ("" for an empty or absent index). */
static int last_digest(const char *index, char prev[65])
{
    prev[0] = '\0';
    FILE *f = fopen(index, "rb");
    if (f == NULL)
        return errno == ENOENT ? STATUS_OK : STATUS_EUNAVAILABLE;
    char tail[4096];
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    long from = size > (long)sizeof tail - 1 ? size - (long)sizeof tail + 1 : 0;
    size_t got =
        size >= 0 && fseek(f, from, SEEK_SET) == 0 ? fread(tail, 1, sizeof tail - 1, f) : 0;
    fclose(f);
    if (size < 0)
        return STATUS_EUNAVAILABLE;
    tail[got] = '\0';
    if (got < 66 || tail[got - 1] != '\n')
        return got == 0 ? STATUS_OK : STATUS_EUNAVAILABLE; /* a line cut short: refuse to chain */
    tail[got - 1] = '\0';
    char *line = strrchr(tail, '\n');
    line = line ? line + 1 : tail;
    if (strlen(line) < 66 || !digest_is_hex(line, 64))
        return STATUS_EUNAVAILABLE;
    memcpy(prev, line, 64);
    prev[64] = '\0';
    return STATUS_OK;
}

int archive_index_add(const char *graph_dir, const char *run_id, const char *file,
                      const json_t *contexts)
{
    char index[1024], path[1536], sha[65], prev[65];
    uint64_t bytes = 0;
    snprintf(index, sizeof index, "%s/%s", graph_dir, ARCHIVE_INDEX_NAME);
    snprintf(path, sizeof path, "%s/%s", graph_dir, file);
    int rc = file_sha256(path, sha, &bytes);
    if (rc == STATUS_OK)
        rc = last_digest(index, prev);
    if (rc != STATUS_OK)
        return rc == STATUS_ENOMEM ? rc : STATUS_EUNAVAILABLE;
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:s}", "run_id", run_id, "file", file, "sha256",
                          sha, "bytes", (json_int_t)bytes, "prev", prev);
    if (j != NULL && contexts != NULL && json_object_set(j, "contexts", (json_t *)contexts) != 0) {
        json_decref(j);
        j = NULL;
    }
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    char digest[65];
    if (text == NULL || digest_sha256_hex(text, strlen(text), digest) != 0) {
        free(text);
        return STATUS_ENOMEM;
    }
    int fd = open(index, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    char *line = fd >= 0 ? malloc(strlen(text) + 67) : NULL;
    if (line != NULL) {
        int len = sprintf(line, "%s %s\n", digest, text);
        rc =
            write(fd, line, (size_t)len) == len && fsync(fd) == 0 ? STATUS_OK : STATUS_EUNAVAILABLE;
    } else {
        rc = fd >= 0 ? STATUS_ENOMEM : STATUS_EUNAVAILABLE;
    }
    if (fd >= 0)
        close(fd);
    free(line);
    free(text);
    return rc;
}

static int index_fail(archive_index_check *out, const char *fmt, const char *a, const char *b)
{
    char sa[100], sb[160];
    snprintf(sa, sizeof sa, "%.99s", a);
    snprintf(sb, sizeof sb, "%.159s", b);
    out->intact = false;
    snprintf(out->problem, sizeof out->problem, fmt, sa, sb);
    return STATUS_OK;
}

static const char *text_or_empty(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* Reads the index's lines into named ({"<file>": {"run_id","sha256"}}, the last line of a file
 * winning: a run archived again after its removal failed), checking each line and the chain. */
static int read_index(FILE *f, json_t *named, archive_index_check *out)
{
    char *line = NULL, prev[65] = "", no[24];
    size_t cap = 0;
    ssize_t got = 0;
    int rc = STATUS_OK;
    while (out->intact && (got = archive_read_line(f, &line, &cap)) > 0) {
        char digest[65];
        snprintf(no, sizeof no, "%llu", (unsigned long long)out->runs + 1);
        size_t len = line[got - 1] == '\n' ? (size_t)got - 1 : (size_t)got;
        json_t *j = NULL;
        if (len < 66 || line[64] != ' ' || line[got - 1] != '\n' ||
            digest_sha256_hex(line + 65, len - 65, digest) != 0 || memcmp(digest, line, 64) != 0) {
            index_fail(out, "index line %s%s: its SHA-256 does not match its bytes (altered)", no,
                       "");
        } else if ((j = json_loadb(line + 65, len - 65, 0, NULL)) == NULL ||
                   strcmp(text_or_empty(j, "prev"), prev) != 0) {
            index_fail(out,
                       "index line %s%s does not follow the line before it (a line was "
                       "removed or moved)",
                       no, "");
        } else if (json_object_set(named, text_or_empty(j, "file"), j) != 0) {
            rc = STATUS_ENOMEM;
        } else {
            memcpy(prev, line, 64);
            prev[64] = '\0';
            out->runs++;
        }
        json_decref(j);
        if (rc != STATUS_OK)
            break;
    }
    if (rc == STATUS_OK && got == -2) {
        snprintf(no, sizeof no, "%llu", (unsigned long long)out->runs + 1);
        index_fail(out, "index line %s%s is longer than any index line", no, "");
    } else if (rc == STATUS_OK && got == -1) {
        rc = errno == ENOMEM ? STATUS_ENOMEM : STATUS_EUNAVAILABLE;
    }
    free(line);
    return rc;
}

/* The archive files of graph_dir (<day>/<run>.charter-archive), each checked to be named. */
static int unnamed_files(const char *graph_dir, const json_t *named, archive_index_check *out)
{
    DIR *top = opendir(graph_dir);
    if (top == NULL)
        return STATUS_EUNAVAILABLE;
    struct dirent *day;
    while (out->intact && (day = readdir(top)) != NULL) {
        if (day->d_name[0] == '.')
            continue;
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/%s", graph_dir, day->d_name);
        DIR *d = opendir(sub);
        struct dirent *e;
        while (d != NULL && out->intact && (e = readdir(d)) != NULL) {
            size_t l = strlen(e->d_name), sl = strlen(ARCHIVE_SUFFIX);
            if (l <= sl || strcmp(e->d_name + l - sl, ARCHIVE_SUFFIX) != 0)
                continue;
            char file[600];
            snprintf(file, sizeof file, "%s/%s", day->d_name, e->d_name);
            out->files++;
            if (json_object_get(named, file) == NULL)
                index_fail(out, "archive %s%s is not in the index", file, "");
        }
        if (d != NULL)
            closedir(d);
    }
    closedir(top);
    return STATUS_OK;
}

int archive_index_verify(const char *graph_dir, archive_index_visit visit, void *ctx,
                         archive_index_check *out)
{
    memset(out, 0, sizeof *out);
    out->intact = true;
    char index[1024];
    snprintf(index, sizeof index, "%s/%s", graph_dir, ARCHIVE_INDEX_NAME);
    FILE *f = fopen(index, "rb");
    if (f == NULL)
        return errno == ENOENT ? STATUS_ENOTFOUND : STATUS_EUNAVAILABLE;
    json_t *named = json_object();
    int rc = named ? read_index(f, named, out) : STATUS_ENOMEM;
    fclose(f);
    const char *file;
    json_t *entry;
    json_object_foreach(named, file, entry)
    {
        if (rc != STATUS_OK || !out->intact)
            break;
        char path[1536], sha[65];
        uint64_t bytes = 0;
        const char *run = json_string_value(json_object_get(entry, "run_id"));
        snprintf(path, sizeof path, "%s/%s", graph_dir, file);
        bool inside = archive_index_file_inside(graph_dir, file, run ? run : "");
        int frc = inside ? file_sha256(path, sha, &bytes) : STATUS_EDENIED;
        if (frc == STATUS_EDENIED)
            index_fail(out, "run %s: its archive %s is not a file of the graph's folder",
                       run ? run : "?", file);
        else if (frc == STATUS_ENOTFOUND)
            index_fail(out, "run %s: its archive %s is missing (removed)", run ? run : "?", file);
        else if (frc != STATUS_OK)
            rc = frc;
        else if (strcmp(sha, text_or_empty(entry, "sha256")) != 0)
            index_fail(out, "run %s: its archive %s is not the one indexed (its SHA-256 differs)",
                       run ? run : "?", file);
        else if (visit != NULL)
            rc = visit(ctx, path, run ? run : "");
    }
    if (rc == STATUS_OK && out->intact)
        rc = unnamed_files(graph_dir, named, out);
    json_decref(named);
    return rc;
}

/* True when line (len bytes, without its newline) holds (its digest) and names the run run_id
 * or, run_id NULL, lists context_id among its contexts; *entry then gets its JSON (owned). */
static bool line_names(const char *line, size_t len, const char *context_id, const char *run_id,
                       json_t **entry)
{
    char digest[65];
    *entry = NULL;
    if (len < 66 || line[64] != ' ' || digest_sha256_hex(line + 65, len - 65, digest) != 0 ||
        memcmp(digest, line, 64) != 0)
        return false;
    json_t *j = json_loadb(line + 65, len - 65, 0, NULL);
    bool named = false;
    if (run_id != NULL) {
        named = strcmp(text_or_empty(j, "run_id"), run_id) == 0;
    } else {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(j, "contexts"), i, c)
        {
            named = named || (json_is_string(c) && strcmp(json_string_value(c), context_id) == 0);
        }
    }
    if (named)
        *entry = j;
    else
        json_decref(j);
    return named;
}

/* The last line of the index at path that names the run or the context (line_names), or NULL.
 * Returns STATUS_OK, STATUS_ENOTFOUND (no index) or STATUS_EUNAVAILABLE. */
static int last_naming(const char *path, const char *context_id, const char *run_id, json_t **found)
{
    *found = NULL;
    /* The id as the line's JSON text holds it (ids hold no character JSON escapes): a line
     * without that text is skipped unparsed. */
    char needle[200];
    if (run_id != NULL)
        snprintf(needle, sizeof needle, "\"run_id\":\"%s\"", run_id);
    else
        snprintf(needle, sizeof needle, "\"%s\"", context_id);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return errno == ENOENT ? STATUS_ENOTFOUND : STATUS_EUNAVAILABLE;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while ((got = archive_read_line(f, &line, &cap)) > 0) {
        if (strstr(line, needle) == NULL)
            continue;
        size_t len = line[got - 1] == '\n' ? (size_t)got - 1 : (size_t)got;
        json_t *entry = NULL;
        if (line_names(line, len, context_id, run_id, &entry)) {
            json_decref(*found);
            *found = entry;
        }
    }
    int rc = got == -1 && errno == ENOMEM ? STATUS_ENOMEM
             : got < 0                    ? STATUS_EUNAVAILABLE
                                          : STATUS_OK;
    free(line);
    fclose(f);
    return rc;
}

bool archive_index_file_inside(const char *graph_dir, const char *file, const char *run_id)
{
    const char *slash = strchr(file, '/');
    if (slash == NULL || slash == file || strchr(slash + 1, '/') != NULL)
        return false;
    for (const char *p = file; p < slash; p++)
        if (!isdigit((unsigned char)*p) && *p != '-')
            return false;
    size_t lr = strlen(run_id);
    if (lr == 0 || strncmp(slash + 1, run_id, lr) != 0 ||
        strcmp(slash + 1 + lr, ARCHIVE_SUFFIX) != 0)
        return false;
    /* The day folder or the file may be a symbolic link: what is read is where it leads. */
    char path[1536], real_dir[PATH_MAX], real_file[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", graph_dir, file);
    if (realpath(graph_dir, real_dir) == NULL)
        return false;
    if (realpath(path, real_file) == NULL)
        return errno == ENOENT; /* nothing there to read: found missing, not outside */
    size_t ld = strlen(real_dir);
    return strncmp(real_file, real_dir, ld) == 0 && real_file[ld] == '/';
}

int archive_index_find(const char *graph_dir, const char *context_id, const char *run_id,
                       char *file, size_t nf, char *run, size_t nr)
{
    if (run_id != NULL && *run_id == '\0')
        run_id = NULL;
    if (run_id == NULL && (context_id == NULL || *context_id == '\0'))
        return STATUS_ENOTFOUND;
    char index[1024];
    snprintf(index, sizeof index, "%s/%s", graph_dir, ARCHIVE_INDEX_NAME);
    json_t *found = NULL;
    int rc = last_naming(index, context_id, run_id, &found);
    if (rc == STATUS_OK && found == NULL)
        rc = STATUS_ENOTFOUND;
    if (rc == STATUS_OK) {
        snprintf(file, nf, "%s", text_or_empty(found, "file"));
        snprintf(run, nr, "%s", text_or_empty(found, "run_id"));
        char path[1536], sha[65];
        uint64_t bytes = 0;
        snprintf(path, sizeof path, "%s/%s", graph_dir, file);
        /* Checked before the file is opened: an index line is no licence to read elsewhere. */
        int frc = archive_index_file_inside(graph_dir, text_or_empty(found, "file"),
                                            text_or_empty(found, "run_id"))
                      ? file_sha256(path, sha, &bytes)
                      : STATUS_EDENIED;
        if (frc == STATUS_ENOMEM || frc == STATUS_EDENIED)
            rc = frc;
        else if (frc != STATUS_OK || strcmp(sha, text_or_empty(found, "sha256")) != 0)
            rc = STATUS_EPROTO;
    }
    json_decref(found);
    return rc;
}
