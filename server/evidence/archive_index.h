/*
 * archive_index.h - the index of a graph's archive folder: one line per archived run, so an
 * archive file that was removed (or replaced) is named, not just missed (docs/archive.md).
 *
 * <archive-dir>/<graph>/index.charter-archive-index is append-only, one line a run in the
 * archive line form ("<sha256 of the JSON> <JSON>\n"): {"run_id","file","sha256","bytes",
 * "contexts","prev"}, file relative to the graph folder, sha256 the whole file's, contexts the
 * ids of the run's contexts (absent from lines written before it was kept), prev the digest of
 * the line before ("" for the first), so a line removed or moved breaks the chain. The
 * retention pass adds a run's line after its archive verified and before the run leaves the
 * database. The contexts let a call through a context that left the database find its run's
 * archive (archive_index_find) without opening any archive.
 */
#ifndef CHARTER_ARCHIVE_INDEX_H
#define CHARTER_ARCHIVE_INDEX_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ARCHIVE_INDEX_NAME "index.charter-archive-index"
#define ARCHIVE_SUFFIX ".charter-archive"

/* Appends the line of run_id's archive (file, relative to graph_dir) to graph_dir's index and
 * flushes it to disk; contexts (borrowed, may be NULL: left out) the run's context ids.
 * Returns STATUS_OK, STATUS_EUNAVAILABLE (the index or the archive cannot be read or written),
 * STATUS_ENOMEM. */
int archive_index_add(const char *graph_dir, const char *run_id, const char *file,
                      const json_t *contexts);

/* True when file, as an index line of graph_dir names the archive of run_id, is
 * <YYYY-MM-DD>/<run_id>.charter-archive and is, symbolic links followed, inside graph_dir (or
 * is not there at all: then it is missing, not elsewhere). A line is written by charterd, but
 * the index is a file like any other: what it names is read only when this holds. */
bool archive_index_file_inside(const char *graph_dir, const char *file, const char *run_id);

/* The archive of a run in graph_dir's index: the run run_id when it is not NULL or "", else
 * the run whose line lists context_id among its contexts; the last such line when there are
 * several (a run archived again after its removal failed). One pass over the index, lines
 * that do not hold the id's text skipped unparsed: the cost grows with the number of runs
 * archived, and is paid only by a call for a run or through a context the database no longer
 * has. file (nf bytes) gets the archive's path relative to graph_dir, run (nr bytes) its run.
 * The file is checked to be inside graph_dir (archive_index_file_inside) before it is opened,
 * then to be the one indexed (its SHA-256). Returns STATUS_OK; STATUS_ENOTFOUND (no index, or
 * no line names the run or context); STATUS_EPROTO (the file is missing or not the one
 * indexed: file and run are set); STATUS_EDENIED (the line names a file that is not the run's
 * archive in graph_dir: nothing was opened; file and run are set); STATUS_EUNAVAILABLE;
 * STATUS_ENOMEM. */
int archive_index_find(const char *graph_dir, const char *context_id, const char *run_id,
                       char *file, size_t nf, char *run, size_t nr);

/* Visits each archive the index names that holds: path (the file), run_id. Returns 0 to go on. */
typedef int (*archive_index_visit)(void *ctx, const char *path, const char *run_id);

typedef struct {
    bool intact;
    uint64_t runs;     /* lines of the index */
    uint64_t files;    /* archive files found in the folder */
    char problem[400]; /* the first problem, "" when intact */
} archive_index_check;

/* Checks graph_dir against its index: every line holds (its digest, the chain), every file it
 * names is the run's archive inside graph_dir (archive_index_file_inside), exists and has its
 * SHA-256, and every archive file of the folder is named. visit (may
 * be NULL) is called for each named file that holds. Returns STATUS_OK with *out (intact or
 * the first problem named: "run r1: its archive 2026-12-01/r1.charter-archive is missing"),
 * STATUS_ENOTFOUND (no index in graph_dir), STATUS_EUNAVAILABLE, STATUS_ENOMEM, or what visit
 * returned when it stopped. */
int archive_index_verify(const char *graph_dir, archive_index_visit visit, void *ctx,
                         archive_index_check *out);

#endif
