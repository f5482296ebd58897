/*
 * charter-dojo.c - the benchmark's command: options, the passes (each starts charterd and
 * charterd-nullgate on fresh graphs, installs every suite and runs every benign and attack
 * case in both), the comparison of two passes, the report and the JSON lines (docs/dojo.md).
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dojo.h"

#ifndef CHARTER_DOJO_SUITES
#define CHARTER_DOJO_SUITES "bench/dojo"
#endif

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: charter-dojo [--suite NAME] [--out FILE] [--redis URL] [--suites DIR]\n"
        "                    [--max-users N] [--max-injections N] [--no-repeat] [--check]\n"
        "                    [--quiet]\n"
        "\n"
        "Runs the agent-security benchmark of docs/dojo.md through charter: every user task of\n"
        "every suite alone (benign) and under every injection task of its suite (security\n"
        "cases), through charterd (guard on) against the conservative adversary and against\n"
        "the quoting adversary, and through charterd-nullgate (guard off, the null gate),\n"
        "scored over what was committed; then prints the validity checks, followed by a table\n"
        "per suite and in total, per injection class, and the decision latency. Starts\n"
        "its charterd processes itself (found next to this program), in two passes unless\n"
        "--no-repeat: the second, on fresh graphs, must give the same results.\n"
        "\n"
        "  --suite NAME        only this suite (a folder of the suites folder)\n"
        "  --out FILE          one JSON line per case (default dojo-cases.jsonl)\n"
        "  --redis URL         a Redis to hold the graphs (unix:///path); default: each\n"
        "                      charterd starts its own embedded Redis\n"
        "  --suites DIR        the suites folder (default %s)\n"
        "  --max-users N       only the first N user tasks of each suite\n"
        "  --max-injections N  only the first N injection tasks of each suite\n"
        "  --no-repeat         one pass only (the determinism check is skipped)\n"
        "  --check             exit 1 unless every validity check passes\n"
        "  --quiet             no progress lines on stderr\n"
        "  --help              this text\n"
        "\n"
        "Exit status: 0 done (with --check: every check passed), 1 a check failed,\n"
        "2 bad usage or the benchmark could not run.\n",
        CHARTER_DOJO_SUITES);
}

/* A count option's value: a whole number from 1 to 100000 (strtoul alone would take "-1" as
 * every task, "2x" and "1e300" as a prefix, and "0" as no limit). Returns 0, or -1 saying why. */
static int count_option(const char *name, const char *v, unsigned *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long n = v[0] >= '0' && v[0] <= '9' ? strtoul(v, &end, 10) : 0;
    if (end == NULL || *end != '\0' || errno != 0 || n < 1 || n > 100000) {
        dojo_say("--%s needs a whole number from 1 to 100000, got \"%s\"", name, v);
        return -1;
    }
    *out = (unsigned)n;
    return 0;
}

static int parse(int argc, char **argv, dojo_options *o)
{
    static const struct option longs[] = {{"suite", required_argument, NULL, 's'},
                                          {"out", required_argument, NULL, 'o'},
                                          {"redis", required_argument, NULL, 'r'},
                                          {"suites", required_argument, NULL, 'd'},
                                          {"max-users", required_argument, NULL, 'u'},
                                          {"max-injections", required_argument, NULL, 'i'},
                                          {"no-repeat", no_argument, NULL, 'n'},
                                          {"check", no_argument, NULL, 'c'},
                                          {"quiet", no_argument, NULL, 'q'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    o->suites_dir = CHARTER_DOJO_SUITES;
    o->out = "dojo-cases.jsonl";
    int ch;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 's':
            o->only = optarg;
            break;
        case 'o':
            o->out = optarg;
            break;
        case 'r':
            o->redis = optarg;
            break;
        case 'd':
            o->suites_dir = optarg;
            break;
        case 'u':
            if (count_option("max-users", optarg, &o->max_users) != 0)
                return -1;
            break;
        case 'i':
            if (count_option("max-injections", optarg, &o->max_injections) != 0)
                return -1;
            break;
        case 'n':
            o->no_repeat = true;
            break;
        case 'c':
            o->check = true;
            break;
        case 'q':
            o->quiet = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return -1;
    }
    /* The results are written at the end: a file that cannot be written is found before the
     * benchmark runs, not after it ran for nothing. */
    FILE *f = fopen(o->out, "a");
    if (f == NULL || fclose(f) != 0) {
        dojo_say("--out %s: %s", o->out, strerror(errno));
        return -1;
    }
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const dojo_suite *)a)->name, ((const dojo_suite *)b)->name);
}

/* Every folder of the suites folder holding a suite.json (or the one --suite names). */
static int load_suites(const dojo_options *o, dojo_suite *suites, size_t *n)
{
    DIR *d = opendir(o->suites_dir);
    if (d == NULL) {
        dojo_say("cannot open %s: %s", o->suites_dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    char err[512];
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        char path[PATH_MAX];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s/suite.json", o->suites_dir, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &sb) != 0 || (o->only && strcmp(o->only, e->d_name)))
            continue;
        if (*n == DOJO_MAX_SUITES ||
            dojo_suite_load(o->suites_dir, e->d_name, &suites[*n], err, sizeof err) != 0) {
            dojo_say("%s", *n == DOJO_MAX_SUITES ? "too many suites" : err);
            rc = -1;
        } else {
            (*n)++;
        }
    }
    closedir(d);
    if (rc == 0 && *n == 0) {
        dojo_say("no suite%s%s in %s", o->only ? " " : "", o->only ? o->only : "", o->suites_dir);
        rc = -1;
    }
    qsort(suites, *n, sizeof *suites, by_name);
    return rc;
}

static size_t limit(size_t n, unsigned max)
{
    return max > 0 && max < n ? max : n;
}

static dojo_case *add_case(dojo_report *r, int arm, size_t *cap)
{
    if (r->n_cases[arm] == *cap) {
        *cap = *cap ? *cap * 2 : 1024;
        dojo_case *nc = realloc(r->cases[arm], *cap * sizeof *nc);
        if (nc == NULL)
            return NULL;
        r->cases[arm] = nc;
    }
    return &r->cases[arm][r->n_cases[arm]++];
}

/* Every case of every suite in one arm: benign first, then user x injection. */
static int run_arm(dojo_report *r, int arm)
{
    dojo_arm *a = &r->arms[arm];
    size_t cap = 0;
    char err[512];
    for (size_t k = 0; k < r->n_suites; k++) {
        const dojo_suite *s = &r->suites[k];
        if (dojo_arm_install(a, s, k, err, sizeof err) != 0 ||
            dojo_history_run(a, s, k, err, sizeof err) != 0) {
            dojo_say("guard %s: %s", a->name, err);
            return -1;
        }
        size_t users = limit(json_array_size(s->users), r->o->max_users);
        size_t injs = limit(json_array_size(s->injections), r->o->max_injections);
        /* The quoting adversary acts only under attack: its benign cases are the guard-on arm's. */
        for (long j = arm == DOJO_QUOTING ? 0 : -1; j < (long)injs; j++)
            for (size_t u = 0; u < users; u++) {
                dojo_case *c = add_case(r, arm, &cap);
                if (c == NULL)
                    return -1;
                dojo_case_run(a, s, k, u, j, c);
            }
    }
    return 0;
}

/* One pass: every arm on a fresh graph. */
static int run_pass(dojo_report *r, unsigned pass)
{
    for (int arm = 0; arm < DOJO_ARMS; arm++) {
        dojo_arm *a = &r->arms[arm];
        double t0 = dojo_now_ms();
        int rc = dojo_arm_start(r->o, a, pass);
        if (rc == 0)
            rc = run_arm(r, arm);
        dojo_arm_stop(r->o, a);
        if (rc != 0)
            return -1;
        if (!r->o->quiet)
            dojo_say("pass %u, guard %s: %zu cases in %.1f s", pass, a->name, r->n_cases[arm],
                     (dojo_now_ms() - t0) / 1000);
    }
    return 0;
}

static void free_cases(dojo_report *r)
{
    for (int arm = 0; arm < DOJO_ARMS; arm++) {
        for (size_t i = 0; i < r->n_cases[arm]; i++)
            dojo_case_free(&r->cases[arm][i]);
        free(r->cases[arm]);
        r->cases[arm] = NULL;
        r->n_cases[arm] = 0;
    }
}

/* The second pass against the first: every case's digest the same. */
static void compare(dojo_report *r, dojo_case *first[DOJO_ARMS], size_t n_first[DOJO_ARMS])
{
    r->repeat_ran = true;
    r->repeat_identical = true;
    for (int arm = 0; arm < DOJO_ARMS && r->repeat_identical; arm++) {
        if (n_first[arm] != r->n_cases[arm]) {
            r->repeat_identical = false;
            snprintf(r->repeat_why, sizeof r->repeat_why, "guard %s: %zu cases, then %zu",
                     r->arms[arm].name, n_first[arm], r->n_cases[arm]);
        }
        for (size_t i = 0; i < n_first[arm] && r->repeat_identical; i++) {
            const char *x = first[arm][i].digest, *y = r->cases[arm][i].digest;
            if (x == NULL || y == NULL || strcmp(x, y) != 0) {
                r->repeat_identical = false;
                snprintf(r->repeat_why, sizeof r->repeat_why, "guard %s, case %zu differs: %.160s",
                         r->arms[arm].name, i, y ? y : "(none)");
            }
        }
    }
}

static int run_passes(dojo_report *r)
{
    if (run_pass(r, 1) != 0)
        return -1;
    if (r->o->no_repeat)
        return 0;
    dojo_case *first[DOJO_ARMS];
    size_t n_first[DOJO_ARMS];
    for (int arm = 0; arm < DOJO_ARMS; arm++) {
        first[arm] = r->cases[arm];
        n_first[arm] = r->n_cases[arm];
        r->cases[arm] = NULL;
        r->n_cases[arm] = 0;
        r->arms[arm].n_lat = 0; /* the figures are the second pass's */
    }
    int rc = run_pass(r, 2);
    if (rc == 0)
        compare(r, first, n_first);
    dojo_report keep = *r;
    for (int arm = 0; arm < DOJO_ARMS; arm++) {
        keep.cases[arm] = first[arm];
        keep.n_cases[arm] = n_first[arm];
    }
    free_cases(&keep);
    return rc;
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(path);
}

int main(int argc, char **argv)
{
    dojo_options o;
    memset(&o, 0, sizeof o);
    if (parse(argc, argv, &o) != 0)
        return 2;
    static dojo_suite suites[DOJO_MAX_SUITES];
    size_t n = 0;
    if (load_suites(&o, suites, &n) != 0)
        return 2;
    snprintf(o.tmpdir, sizeof o.tmpdir, "/tmp/charter-dojo.XXXXXX");
    FILE *rnd = fopen("/dev/urandom", "rb");
    unsigned char raw[20];
    if (mkdtemp(o.tmpdir) == NULL || rnd == NULL || fread(raw, 1, sizeof raw, rnd) != sizeof raw)
        return 2;
    fclose(rnd);
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(o.token + 2 * i, 3, "%02x", raw[i]);
    dojo_arm arms[DOJO_ARMS] = {
        {.name = "on"}, {.name = "off", .null_gate = true}, {.name = "quoting", .quoting = true}};
    dojo_report r = {.o = &o, .suites = suites, .n_suites = n, .arms = arms};
    double t0 = dojo_now_ms();
    int rc = run_passes(&r);
    if (rc != 0) {
        dojo_say("the benchmark could not run (logs kept in %s)", o.tmpdir);
        return 2;
    }
    unsigned unclean = arms[DOJO_ON].unclean + arms[DOJO_OFF].unclean + arms[DOJO_QUOTING].unclean;
    if (unclean > 0)
        dojo_say("charterd logs kept in %s", o.tmpdir);
    else if (nftw(o.tmpdir, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        dojo_say("could not remove %s", o.tmpdir);
    int checks = dojo_report_print(&r);
    bool written = dojo_report_write_lines(&r, o.out) == 0;
    if (written)
        printf("\n%.0f s; one JSON line per case in %s\n", (dojo_now_ms() - t0) / 1000, o.out);
    else
        dojo_say("cannot write %s: %s (the cases' JSON lines are lost)", o.out, strerror(errno));
    free_cases(&r);
    for (int arm = 0; arm < DOJO_ARMS; arm++)
        free(arms[arm].lat);
    for (size_t i = 0; i < n; i++)
        dojo_suite_free(&suites[i]);
    if (!written)
        return 2;
    return o.check && checks != 0 ? 1 : 0;
}
