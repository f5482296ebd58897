/*
 * workflow.c - loads a workflow definition from JSON and validates it before anything uses it.
 *
 * The definition is where every step's authority comes from, so validation is strict and stops
 * at the first problem with one line naming the field path and the rule: unknown fields, wrong
 * types, dangling references, widening delegations, cycles and limits are refused. An empty
 * allowlist is valid and grants nothing; a missing one is an error, never "unrestricted".
 * workflow_check_buffer runs the same checks for a reader (charter workflow validate) and goes
 * on past a problem to the next entry, as long as what follows can still be judged.
 */
#include "policy/workflow.h"
#include "policy/tokens.h"
#include "core/digest.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>
#include <regex.h>

#if defined(__GNUC__)
#define WORKFLOW_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define WORKFLOW_PRINTF(a, b)
#endif

/* Where a validation error is written: the line of the last problem into buf (len bytes), or,
 * when each is set, every problem handed to each (workflow_check_buffer) and the check goes on
 * past it where it can (part_ends). */
typedef struct {
    char *buf;
    size_t len;
    workflow_problem_fn each;
    void *arg;
    size_t count;          /* problems found */
    const char *unchecked; /* parts left unchecked because a part they refer to has problems */
} werr;

/* The longest problem line kept: paths are bounded, and every value quoted in a message is at
 * most a title's 256 bytes. */
#define WORKFLOW_LINE_MAX 2048

/* Writes "path: <message>" into e (one line: control characters become spaces). Returns -1 so
 * callers can `return fail(...)`. */
static int fail(werr *e, const char *path, const char *fmt, ...) WORKFLOW_PRINTF(3, 4);

static int fail(werr *e, const char *path, const char *fmt, ...)
{
    char line[WORKFLOW_LINE_MAX];
    int n = snprintf(line, sizeof line, "%s: ", path);
    if (n >= 0 && (size_t)n < sizeof line) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        va_end(ap);
    }
    for (char *p = line; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            *p = ' ';
        }
    }
    e->count++;
    if (e->buf != NULL && e->len > 0) {
        snprintf(e->buf, e->len, "%s", line);
    }
    if (e->each != NULL) {
        e->each(e->arg, line);
    }
    return -1;
}

/* After one entry of a part was checked (rc its result): true when the check ends here, at the
 * first problem, unless every problem is being collected; a problem sets *bad so the part
 * still fails once its other entries were checked. */
static bool part_ends(int rc, bool *bad, const werr *e)
{
    if (rc == 0) {
        return false;
    }
    *bad = true;
    return e->each == NULL;
}

/* ---- field specifications ---------------------------------------------------------------- */

enum { T_STRING, T_LIST, T_OBJECT, T_BOOL, T_INT };

typedef struct {
    const char *key;
    int type;
    bool required;
} field_spec;

#define N_SPEC(a) (sizeof(a) / sizeof((a)[0]))

static const field_spec top_spec[] = {
    {"name", T_STRING, true},     {"task", T_STRING, true},  {"resources", T_LIST, true},
    {"recipients", T_LIST, true}, {"actors", T_LIST, true},  {"grants", T_LIST, true},
    {"steps", T_LIST, true},      {"expect", T_LIST, false}, {"tools", T_OBJECT, false},
    {"servers", T_OBJECT, false},
};
/* A downstream MCP server charter-mcp fronts (docs/workflows.md, "Downstream MCP servers"): a
 * command it starts and speaks to over stdio, or a url it speaks to over Streamable HTTP; exactly
 * one of the two. Credentials are never in the definition: env_from names variables of
 * charter-mcp's own environment handed to a command, credential_env or credential_file where
 * charter-mcp finds the bearer token it sends to a url. */
static const field_spec server_spec[] = {
    {"command", T_STRING, false},        {"args", T_LIST, false},
    {"env_from", T_LIST, false},         {"url", T_STRING, false},
    {"credential_env", T_STRING, false}, {"credential_file", T_STRING, false},
    {"timeout_ms", T_INT, false},
};
/* A resource holds its content, or is observed: its content is what a host reads at run time
 * (Gate/ObserveSource), within the limits "observed" declares (docs/workflows.md, "Observed
 * resources"). Exactly one of the two is given. */
static const field_spec resource_spec[] = {
    {"id", T_STRING, true},
    {"title", T_STRING, true},
    {"confidentiality", T_STRING, true},
    {"integrity", T_STRING, true},
    {"content", T_STRING, false},
    {"observed", T_OBJECT, false},
};
static const field_spec observed_spec[] = {
    {"max_bytes", T_INT, true},
    {"content_type", T_STRING, false},
};
/* A recipient by id, or a destination class: "match" says which values of a tool's destination
 * argument it stands for (docs/workflows.md, "Destination classes"). */
static const field_spec recipient_spec[] = {
    {"id", T_STRING, true},
    {"clearance", T_STRING, true},
    {"approval", T_OBJECT, false},
    {"match", T_OBJECT, false},
};
static const field_spec match_spec[] = {
    {"suffix", T_STRING, false},
    {"values", T_LIST, false},
    {"pattern", T_STRING, false},
};
/* A tool's properties (the top-level "tools" object maps a tool name to one) and a human
 * approval a tool or a recipient asks for (docs/workflows.md, "Human approval"). A tool with
 * "arguments" is a live tool (docs/workflows.md, "Tools with arguments"); one without is a
 * send tool that only asks for approval. */
static const field_spec tool_spec[] = {
    {"approval", T_OBJECT, false},
    {"arguments", T_LIST, false},
    {"effect", T_BOOL, false},
    {"destination", T_STRING, false},
    {"result", T_STRING, false},
    {"server", T_STRING, false},
    {"downstream_tool", T_STRING, false},
    {"clearance", T_STRING, false},
};
static const field_spec argument_spec[] = {
    {"name", T_STRING, true},
    {"role", T_STRING, true},
};
static const field_spec approval_spec[] = {
    {"by", T_STRING, true},
    {"within_ms", T_INT, true},
};
static const field_spec actor_spec[] = {
    {"id", T_STRING, true},
    {"kind", T_STRING, true},
};
static const field_spec grant_spec[] = {
    {"id", T_STRING, true},       {"grantee", T_STRING, true},
    {"issuer", T_STRING, false},  {"delegated_from", T_STRING, false},
    {"tools", T_LIST, true},      {"recipients", T_LIST, true},
    {"resources", T_LIST, true},  {"valid_from", T_STRING, true},
    {"valid_to", T_STRING, true}, {"budget", T_OBJECT, false},
};
static const field_spec step_spec[] = {
    {"name", T_STRING, true},
    {"actor", T_STRING, true},
    {"grant", T_STRING, true},
    {"tools", T_LIST, true},
    {"recipients", T_LIST, true},
    {"resources", T_LIST, true},
    {"reads", T_LIST, true},
    {"receives", T_LIST, true},
    {"output_title", T_STRING, true},
    {"deliver", T_OBJECT, false},
    {"recovery", T_BOOL, false},
    {"public_fields", T_OBJECT, false},
    {"public_template", T_STRING, false},
    {"script", T_OBJECT, false},
};
static const field_spec deliver_spec[] = {
    {"tool", T_STRING, true},
    {"recipient", T_STRING, true},
};
/* The four kinds of expectation (docs/workflows.md, "Expected decisions"). */
static const field_spec expect_event_spec[] = {
    {"step", T_STRING, true}, {"event", T_STRING, true},    {"outcome", T_STRING, true},
    {"codes", T_LIST, false}, {"witness", T_STRING, false},
};
static const field_spec expect_recover_spec[] = {
    {"recover", T_BOOL, true},
    {"outcome", T_STRING, true},
    {"codes", T_LIST, false},
    {"witness", T_STRING, false},
};
static const field_spec expect_status_spec[] = {
    {"status", T_STRING, true},
};
static const field_spec expect_delivery_spec[] = {
    {"delivery", T_STRING, true},
    {"includes", T_LIST, false},
    {"excludes", T_LIST, false},
};
static const field_spec script_spec[] = {
    {"content", T_STRING, true}, {"fields", T_OBJECT, false}, {"handoff", T_LIST, false},
    {"observe", T_LIST, false},  {"invoke", T_LIST, false},
};
/* What a scripted run observes and invokes in a step (docs/workflows.md, "Scripted live
 * tools"): the script stands for the host's reads and the model's tool calls. */
static const field_spec script_observe_spec[] = {
    {"resource", T_STRING, true},
    {"locator", T_STRING, true},
    {"content", T_STRING, true},
};
static const field_spec script_invoke_spec[] = {
    {"tool", T_STRING, true},
    {"arguments", T_LIST, true},
};
static const field_spec script_argument_spec[] = {
    {"name", T_STRING, true},
    {"value", T_STRING, true},
    {"from_task", T_BOOL, false},
    {"quoted_from", T_STRING, false},
};

static const char *type_rule(int type)
{
    switch (type) {
    case T_STRING:
        return "must be a string";
    case T_LIST:
        return "must be a list";
    case T_OBJECT:
        return "must be an object";
    case T_INT:
        return "must be an integer";
    default:
        return "must be true or false";
    }
}

static bool has_type(const json_t *v, int type)
{
    switch (type) {
    case T_STRING:
        return json_is_string(v);
    case T_LIST:
        return json_is_array(v);
    case T_OBJECT:
        return json_is_object(v);
    case T_INT:
        return json_is_integer(v);
    default:
        return json_is_boolean(v);
    }
}

/* path.key into p, or just key at the top level (path ""). */
static void join(char *p, size_t size, const char *path, const char *key)
{
    if (path[0] == '\0') {
        snprintf(p, size, "%.64s", key);
    } else {
        snprintf(p, size, "%s.%.64s", path, key);
    }
}

/* v must be an object holding only the spec's keys, each of its type, the required ones present.
 * path "" is the top level. */
static int check_object(const json_t *v, const char *path, const field_spec *spec, size_t n,
                        werr *e)
{
    if (!json_is_object(v)) {
        return fail(e, path[0] == '\0' ? "definition" : path, "must be an object");
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        bool known = false;
        for (size_t i = 0; i < n && !known; i++) {
            known = strcmp(spec[i].key, key) == 0;
        }
        if (!known) {
            char p[384];
            join(p, sizeof p, path, key);
            return fail(e, p, "unknown field");
        }
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *f = json_object_get(v, spec[i].key);
        char p[384];
        join(p, sizeof p, path, spec[i].key);
        if (f == NULL) {
            if (spec[i].required) {
                return fail(e, p, "required field is missing");
            }
            continue;
        }
        if (!has_type(f, spec[i].type)) {
            return fail(e, p, "%s", type_rule(spec[i].type));
        }
    }
    return 0;
}

/* ---- scalar rules ------------------------------------------------------------------------ */

static bool id_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > WORKFLOW_ID_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok) {
            return false;
        }
    }
    return true;
}

static int check_id(const json_t *v, const char *path, werr *e)
{
    if (!json_is_string(v)) {
        return fail(e, path, "must be a string");
    }
    size_t n = json_string_length(v);
    if (n > WORKFLOW_ID_MAX) {
        return fail(e, path,
                    "%zu bytes, at most %d (ids are 1..64 characters of A-Z a-z 0-9 . _ -)", n,
                    WORKFLOW_ID_MAX);
    }
    if (!id_valid(json_string_value(v))) {
        return fail(e, path, "\"%s\" is not a valid id (1..64 characters of A-Z a-z 0-9 . _ -)",
                    json_string_value(v));
    }
    return 0;
}

/* A string of at most max bytes; non-empty when nonempty is set. */
static int check_text(const json_t *v, const char *path, size_t max, bool nonempty, werr *e)
{
    if (!json_is_string(v)) {
        return fail(e, path, "must be a string");
    }
    size_t n = json_string_length(v);
    if (nonempty && n == 0) {
        return fail(e, path, "must not be empty");
    }
    if (n > max) {
        return fail(e, path, "%zu bytes, at most %zu (limit)", n, max);
    }
    return 0;
}

/* The position of name in names (NULL-terminated), or -1. */
static int name_index(const char *const *names, const char *name)
{
    for (int i = 0; names[i] != NULL; i++) {
        if (strcmp(names[i], name) == 0) {
            return i;
        }
    }
    return -1;
}

static const char *const conf_names[] = {"public", "internal", "confidential", NULL};
static const char *const integrity_names[] = {"untrusted", "trusted", NULL};
static const char *const kind_names[] = {"human", "agent", NULL};

static int check_enum(const json_t *v, const char *path, const char *const *names,
                      const char *expected, werr *e)
{
    if (name_index(names, json_string_value(v)) < 0) {
        return fail(e, path, "\"%.64s\" is not one of %s", json_string_value(v), expected);
    }
    return 0;
}

static bool leap_year(long y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Days from 1970-01-01 to the civil date y-m-d (proleptic Gregorian). */
static long days_from_civil(long y, long m, long d)
{
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400;
    long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* Parses exactly "YYYY-MM-DDTHH:MM:SSZ" (RFC 3339, UTC, no fraction, years 1970..9999) into
 * seconds since the epoch. Returns 0, or -1 when s is not of that form or not a real time. */
static int parse_time(const char *s, long long *out)
{
    static const char form[] = "dddd-dd-ddTdd:dd:ddZ";
    if (strlen(s) != sizeof form - 1) {
        return -1;
    }
    for (size_t i = 0; i < sizeof form - 1; i++) {
        if (form[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != form[i]) {
            return -1;
        }
    }
#define DIGITS2(p) ((long)((p)[0] - '0') * 10 + ((p)[1] - '0'))
    long year = DIGITS2(s) * 100 + DIGITS2(s + 2);
    long mon = DIGITS2(s + 5), day = DIGITS2(s + 8);
    long hh = DIGITS2(s + 11), mm = DIGITS2(s + 14), ss = DIGITS2(s + 17);
#undef DIGITS2
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (year < 1970 || mon < 1 || mon > 12 || day < 1) {
        return -1;
    }
    long dim = mdays[mon - 1] + (mon == 2 && leap_year(year) ? 1 : 0);
    if (day > dim || hh > 23 || mm > 59 || ss > 59) {
        return -1;
    }
    *out = (long long)days_from_civil(year, mon, day) * 86400 + hh * 3600 + mm * 60 + ss;
    return 0;
}

int workflow_time_parse(const char *s, long long *out)
{
    return s != NULL && out != NULL ? parse_time(s, out) : -1;
}

static int check_time(const json_t *v, const char *path, long long *out, werr *e)
{
    if (parse_time(json_string_value(v), out) != 0) {
        return fail(e, path, "\"%.64s\" is not an RFC 3339 UTC time like \"2026-01-01T00:00:00Z\"",
                    json_string_value(v));
    }
    return 0;
}

/* ---- lists and references ---------------------------------------------------------------- */

static bool list_has(const json_t *list, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (strcmp(json_string_value(v), s) == 0) {
            return true;
        }
    }
    return false;
}

/* A list of at most max distinct valid ids. */
static int check_id_list(const json_t *list, const char *path, size_t max, werr *e)
{
    size_t n = json_array_size(list);
    if (n > max) {
        return fail(e, path, "%zu entries, at most %zu (limit)", n, max);
    }
    for (size_t i = 0; i < n; i++) {
        char p[384];
        snprintf(p, sizeof p, "%s[%zu]", path, i);
        if (check_id(json_array_get(list, i), p, e) != 0) {
            return -1;
        }
        const char *s = json_string_value(json_array_get(list, i));
        for (size_t j = 0; j < i; j++) {
            if (strcmp(json_string_value(json_array_get(list, j)), s) == 0) {
                return fail(e, path, "\"%s\" is listed twice", s);
            }
        }
    }
    return 0;
}

/* The entry of arr (a validated list of objects) whose key field equals id, or -1. */
static long find_entry(const json_t *arr, const char *key, const char *id)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        const char *s = json_string_value(json_object_get(v, key));
        if (s != NULL && strcmp(s, id) == 0) {
            return (long)i;
        }
    }
    return -1;
}

/* Every entry of list names an entry of arr (noun: what arr holds, for the message). */
static int check_refs(const json_t *list, const char *path, const json_t *arr, const char *noun,
                      werr *e)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (find_entry(arr, "id", json_string_value(v)) < 0) {
            return fail(e, path, "unknown %s \"%s\"", noun, json_string_value(v));
        }
    }
    return 0;
}

/* The first entry of list that super does not hold, or NULL. */
static const char *not_subset(const json_t *list, const json_t *super)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (!list_has(super, json_string_value(v))) {
            return json_string_value(v);
        }
    }
    return NULL;
}

/* ---- the parts of a definition ----------------------------------------------------------- */

typedef struct {
    const json_t *resources, *recipients, *actors, *grants, *steps;
    const json_t *servers; /* the "servers" object, or NULL */
} wdef;

static int check_count(const json_t *arr, const char *path, size_t max, werr *e)
{
    if (json_array_size(arr) > max) {
        return fail(e, path, "%zu entries, at most %zu (limit)", json_array_size(arr), max);
    }
    return 0;
}

/* The key field of entry i of arr (named part, holding nouns): a valid id not used by an
 * earlier entry of the same kind. */
static int check_entry_id(const json_t *arr, const char *part, size_t i, const char *key,
                          const char *noun, werr *e)
{
    char path[96];
    snprintf(path, sizeof path, "%s[%zu].%s", part, i, key);
    const json_t *v = json_object_get(json_array_get(arr, i), key);
    if (check_id(v, path, e) != 0) {
        return -1;
    }
    const char *id = json_string_value(v);
    for (size_t j = 0; j < i; j++) {
        /* An earlier entry is valid here, unless every problem is collected: then one that
         * broke a rule may have no id. */
        const char *other = json_string_value(json_object_get(json_array_get(arr, j), key));
        if (other != NULL && strcmp(other, id) == 0) {
            return fail(e, path, "duplicate %s id \"%s\" (also %s[%zu])", noun, id, part, j);
        }
    }
    return 0;
}

/* ---- live tools: observed resources, destination classes, tool arguments ---------------- */

/* pattern anchored to the whole value, compiled as a POSIX extended regular expression into
 * *re (regfree it on success). Returns 0, or -1 when it does not compile. */
static int pattern_compile(const char *pattern, regex_t *re)
{
    size_t n = strlen(pattern) + 5;
    char *whole = malloc(n);
    if (whole == NULL) {
        return -1;
    }
    snprintf(whole, n, "^(%s)$", pattern);
    int rc = regcomp(re, whole, REG_EXTENDED | REG_NOSUB);
    free(whole);
    return rc == 0 ? 0 : -1;
}

static bool pattern_compiles(const char *pattern)
{
    regex_t re;
    if (pattern_compile(pattern, &re) != 0) {
        return false;
    }
    regfree(&re);
    return true;
}

/* A string of 1..max bytes holding no NUL byte (JSON may spell one "\u0000"; a value cut at
 * it would match what it does not say). */
static int check_plain(const json_t *v, const char *path, size_t max, werr *e)
{
    if (check_text(v, path, max, true, e) != 0) {
        return -1;
    }
    if (strlen(json_string_value(v)) != json_string_length(v)) {
        return fail(e, path, "holds a NUL byte");
    }
    return 0;
}

/* An observed resource's limits: max_bytes 1..WORKFLOW_MAX_OBSERVED_BYTES, content_type
 * "type/subtype" of printable ASCII without spaces, at most 128 bytes. */
static int check_observed(const json_t *o, const char *p, werr *e)
{
    char f[320];
    if (check_object(o, p, observed_spec, N_SPEC(observed_spec), e) != 0) {
        return -1;
    }
    snprintf(f, sizeof f, "%s.max_bytes", p);
    json_int_t n = json_integer_value(json_object_get(o, "max_bytes"));
    if (n < 1 || n > WORKFLOW_MAX_OBSERVED_BYTES) {
        return fail(e, f, "%lld is outside 1..%d bytes", (long long)n, WORKFLOW_MAX_OBSERVED_BYTES);
    }
    const json_t *ct = json_object_get(o, "content_type");
    if (ct == NULL) {
        return 0;
    }
    snprintf(f, sizeof f, "%s.content_type", p);
    if (check_plain(ct, f, 128, e) != 0) {
        return -1;
    }
    const char *s = json_string_value(ct);
    const char *slash = strchr(s, '/');
    for (const char *c = s; *c != '\0'; c++) {
        if (*c <= ' ' || *c > '~') {
            slash = NULL;
        }
    }
    if (slash == NULL || slash == s || slash[1] == '\0') {
        return fail(e, f, "\"%.64s\" is not a media type like \"text/plain\"", s);
    }
    return 0;
}

/* A destination class's "match": exactly one of suffix (a text the value ends with), values
 * (the values it stands for, each listed once) and pattern (a POSIX extended regular
 * expression the whole value must match; one that does not compile is refused). */
static int check_match(const json_t *m, const char *p, werr *e)
{
    char f[320];
    if (check_object(m, p, match_spec, N_SPEC(match_spec), e) != 0) {
        return -1;
    }
    if (json_object_size(m) != 1) {
        return fail(e, p, "needs exactly one of suffix, values and pattern");
    }
    const json_t *v = json_object_get(m, "values");
    if (v != NULL) {
        snprintf(f, sizeof f, "%s.values", p);
        if (json_array_size(v) == 0 || json_array_size(v) > WORKFLOW_MAX_MATCH_VALUES) {
            return fail(e, f, "1..%d values", WORKFLOW_MAX_MATCH_VALUES);
        }
        for (size_t k = 0; k < json_array_size(v); k++) {
            char q[352];
            snprintf(q, sizeof q, "%s[%zu]", f, k);
            if (check_plain(json_array_get(v, k), q, WORKFLOW_MAX_TITLE_BYTES, e) != 0) {
                return -1;
            }
            for (size_t j = 0; j < k; j++) {
                if (json_equal(json_array_get(v, j), json_array_get(v, k))) {
                    return fail(e, q, "is listed twice");
                }
            }
        }
        return 0;
    }
    const json_t *sfx = json_object_get(m, "suffix");
    snprintf(f, sizeof f, "%s.%s", p, sfx != NULL ? "suffix" : "pattern");
    if (check_plain(sfx != NULL ? sfx : json_object_get(m, "pattern"), f, WORKFLOW_MAX_TITLE_BYTES,
                    e) != 0) {
        return -1;
    }
    if (sfx == NULL && !pattern_compiles(json_string_value(json_object_get(m, "pattern")))) {
        return fail(e, f, "\"%.64s\" is not a POSIX extended regular expression",
                    json_string_value(json_object_get(m, "pattern")));
    }
    return 0;
}

static int check_resource(const wdef *d, size_t i, werr *e)
{
    const json_t *r = json_array_get(d->resources, i);
    char p[64], f[256];
    snprintf(p, sizeof p, "resources[%zu]", i);
    if (check_object(r, p, resource_spec, N_SPEC(resource_spec), e) != 0) {
        return -1;
    }
    if (check_entry_id(d->resources, "resources", i, "id", "resource", e) != 0) {
        return -1;
    }
    snprintf(f, sizeof f, "%s.title", p);
    if (check_text(json_object_get(r, "title"), f, WORKFLOW_MAX_TITLE_BYTES, true, e) != 0) {
        return -1;
    }
    snprintf(f, sizeof f, "%s.confidentiality", p);
    if (check_enum(json_object_get(r, "confidentiality"), f, conf_names,
                   "public, internal, confidential", e) != 0) {
        return -1;
    }
    snprintf(f, sizeof f, "%s.integrity", p);
    if (check_enum(json_object_get(r, "integrity"), f, integrity_names, "untrusted, trusted", e) !=
        0) {
        return -1;
    }
    const json_t *observed = json_object_get(r, "observed");
    if (observed != NULL && json_object_get(r, "content") != NULL) {
        return fail(e, p, "needs exactly one of content and observed");
    }
    if (observed != NULL) {
        snprintf(f, sizeof f, "%s.observed", p);
        return check_observed(observed, f, e);
    }
    snprintf(f, sizeof f, "%s.content", p);
    if (json_object_get(r, "content") == NULL) {
        return fail(e, f, "required field is missing");
    }
    return check_text(json_object_get(r, "content"), f, WORKFLOW_MAX_CONTENT_BYTES, false, e);
}

static int check_resources(const wdef *d, werr *e)
{
    if (check_count(d->resources, "resources", WORKFLOW_MAX_RESOURCES, e) != 0) {
        return -1;
    }
    bool bad = false;
    for (size_t i = 0; i < json_array_size(d->resources); i++) {
        if (part_ends(check_resource(d, i, e), &bad, e)) {
            return -1;
        }
    }
    return bad ? -1 : 0;
}

static int check_recipient(const wdef *d, size_t i, werr *e)
{
    const json_t *r = json_array_get(d->recipients, i);
    char p[64], f[256];
    snprintf(p, sizeof p, "recipients[%zu]", i);
    if (check_object(r, p, recipient_spec, N_SPEC(recipient_spec), e) != 0) {
        return -1;
    }
    if (check_entry_id(d->recipients, "recipients", i, "id", "recipient", e) != 0) {
        return -1;
    }
    snprintf(f, sizeof f, "%s.clearance", p);
    if (check_enum(json_object_get(r, "clearance"), f, conf_names, "public, internal, confidential",
                   e) != 0) {
        return -1;
    }
    const json_t *m = json_object_get(r, "match");
    snprintf(f, sizeof f, "%s.match", p);
    return m == NULL ? 0 : check_match(m, f, e);
}

static int check_recipients(const wdef *d, werr *e)
{
    if (check_count(d->recipients, "recipients", WORKFLOW_MAX_RECIPIENTS, e) != 0) {
        return -1;
    }
    bool bad = false;
    for (size_t i = 0; i < json_array_size(d->recipients); i++) {
        if (part_ends(check_recipient(d, i, e), &bad, e)) {
            return -1;
        }
    }
    return bad ? -1 : 0;
}

static int check_actor(const wdef *d, size_t i, werr *e)
{
    const json_t *a = json_array_get(d->actors, i);
    char p[64], f[256];
    snprintf(p, sizeof p, "actors[%zu]", i);
    if (check_object(a, p, actor_spec, N_SPEC(actor_spec), e) != 0) {
        return -1;
    }
    if (check_entry_id(d->actors, "actors", i, "id", "actor", e) != 0) {
        return -1;
    }
    snprintf(f, sizeof f, "%s.kind", p);
    return check_enum(json_object_get(a, "kind"), f, kind_names, "human, agent", e);
}

static int check_actors(const wdef *d, werr *e)
{
    if (check_count(d->actors, "actors", WORKFLOW_MAX_ACTORS, e) != 0) {
        return -1;
    }
    bool bad = false;
    for (size_t i = 0; i < json_array_size(d->actors); i++) {
        if (part_ends(check_actor(d, i, e), &bad, e)) {
            return -1;
        }
    }
    return bad ? -1 : 0;
}

/* Budget ceilings a grant may carry, in workflow_budget_ceilings' order. */
static const char *const budget_names[WORKFLOW_N_BUDGETS] = {"max_wall_clock_ms", "max_model_calls",
                                                             "max_steps", "max_deliveries"};

/* A grant's optional budget: an object of budget_names, each an integer 1..10^15. */
static int check_grant_budget(const json_t *b, const char *p, werr *e)
{
    if (b == NULL) {
        return 0;
    }
    const char *k;
    const json_t *v;
    char f[256];
    json_object_foreach((json_t *)b, k, v)
    {
        bool known = false;
        for (size_t i = 0; i < WORKFLOW_N_BUDGETS; i++) {
            known = known || strcmp(k, budget_names[i]) == 0;
        }
        snprintf(f, sizeof f, "%s.budget.%.64s", p, k);
        if (!known) {
            return fail(e, f,
                        "unknown budget (max_wall_clock_ms, max_model_calls, max_steps, "
                        "max_deliveries)");
        }
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > 1000000000000000LL) {
            return fail(e, f, "a budget ceiling is an integer from 1 to 10^15");
        }
    }
    return 0;
}

/* One grant on its own: shape, ids, references to actors, recipients and resources, times. */
static int check_grant_fields(const wdef *d, size_t i, werr *e)
{
    const json_t *g = json_array_get(d->grants, i);
    char p[64], f[256];
    snprintf(p, sizeof p, "grants[%zu]", i);
    if (check_object(g, p, grant_spec, N_SPEC(grant_spec), e) != 0) {
        return -1;
    }
    if (check_entry_id(d->grants, "grants", i, "id", "grant", e) != 0) {
        return -1;
    }
    const char *id = json_string_value(json_object_get(g, "id"));
    const char *grantee = json_string_value(json_object_get(g, "grantee"));
    snprintf(f, sizeof f, "%s.grantee", p);
    if (find_entry(d->actors, "id", grantee) < 0) {
        return fail(e, f, "unknown actor \"%.64s\"", grantee);
    }
    const json_t *issuer = json_object_get(g, "issuer");
    const json_t *parent = json_object_get(g, "delegated_from");
    if (issuer != NULL && parent != NULL) {
        snprintf(f, sizeof f, "%s.issuer", p);
        return fail(e, f, "only a root grant has an issuer; grant %s is delegated (delegated_from)",
                    id);
    }
    if (issuer == NULL && parent == NULL) {
        return fail(
            e, p, "grant %s needs issuer (a root grant) or delegated_from (a delegated grant)", id);
    }
    if (issuer != NULL) {
        snprintf(f, sizeof f, "%s.issuer", p);
        long a = find_entry(d->actors, "id", json_string_value(issuer));
        if (a < 0) {
            return fail(e, f, "unknown actor \"%.64s\"", json_string_value(issuer));
        }
        const char *kind =
            json_string_value(json_object_get(json_array_get(d->actors, (size_t)a), "kind"));
        if (strcmp(kind, "human") != 0) {
            return fail(e, f,
                        "root grant %s is issued by %s, an agent; a root grant's issuer must "
                        "be a human actor",
                        id, json_string_value(issuer));
        }
    } else {
        snprintf(f, sizeof f, "%s.delegated_from", p);
        if (check_id(parent, f, e) != 0) {
            return -1;
        }
    }
    snprintf(f, sizeof f, "%s.tools", p);
    if (check_id_list(json_object_get(g, "tools"), f, WORKFLOW_MAX_TOOLS, e) != 0) {
        return -1;
    }
    snprintf(f, sizeof f, "%s.recipients", p);
    if (check_id_list(json_object_get(g, "recipients"), f, WORKFLOW_MAX_RECIPIENTS, e) != 0 ||
        check_refs(json_object_get(g, "recipients"), f, d->recipients, "recipient", e) != 0) {
        return -1;
    }
    snprintf(f, sizeof f, "%s.resources", p);
    if (check_id_list(json_object_get(g, "resources"), f, WORKFLOW_MAX_RESOURCES, e) != 0 ||
        check_refs(json_object_get(g, "resources"), f, d->resources, "resource", e) != 0) {
        return -1;
    }
    long long from, to;
    snprintf(f, sizeof f, "%s.valid_from", p);
    if (check_time(json_object_get(g, "valid_from"), f, &from, e) != 0) {
        return -1;
    }
    snprintf(f, sizeof f, "%s.valid_to", p);
    if (check_time(json_object_get(g, "valid_to"), f, &to, e) != 0) {
        return -1;
    }
    if (from >= to) {
        return fail(e, f, "%s is not after valid_from %s (valid_from must be before valid_to)",
                    json_string_value(json_object_get(g, "valid_to")),
                    json_string_value(json_object_get(g, "valid_from")));
    }
    return check_grant_budget(json_object_get(g, "budget"), p, e);
}

/* The parent index of grant i, or -1 for a root grant (references already resolved). */
static long grant_parent(const wdef *d, size_t i)
{
    const json_t *p = json_object_get(json_array_get(d->grants, i), "delegated_from");
    return p == NULL ? -1 : find_entry(d->grants, "id", json_string_value(p));
}

static const char *grant_id(const wdef *d, size_t i)
{
    return json_string_value(json_object_get(json_array_get(d->grants, i), "id"));
}

/* Walks up from grant i; a grant seen twice is a cycle (each grant has at most one parent, so
 * every chain that does not reach a root ends in one). */
static int check_grant_cycle(const wdef *d, size_t i, werr *e)
{
    bool seen[WORKFLOW_MAX_GRANTS] = {false};
    char chain[WORKFLOW_MAX_GRANTS * (WORKFLOW_ID_MAX + 4) + 1];
    size_t used = 0;
    chain[0] = '\0';
    long at = (long)i;
    while (at >= 0) {
        int w = snprintf(chain + used, sizeof chain - used, "%s%s", used > 0 ? " -> " : "",
                         grant_id(d, (size_t)at));
        if (w > 0 && (size_t)w < sizeof chain - used) {
            used += (size_t)w;
        }
        if (seen[at]) {
            char f[256];
            snprintf(f, sizeof f, "grants[%zu].delegated_from", i);
            return fail(e, f, "delegation cycle %s", chain);
        }
        seen[at] = true;
        at = grant_parent(d, (size_t)at);
    }
    return 0;
}

/* A delegated grant may only narrow its parent: tools, recipients, resources and the validity
 * window must lie within the parent's (attenuation). */
static int check_grant_widening(const wdef *d, size_t i, werr *e)
{
    long pi = grant_parent(d, i);
    if (pi < 0) {
        return 0;
    }
    const json_t *g = json_array_get(d->grants, i);
    const json_t *pg = json_array_get(d->grants, (size_t)pi);
    const char *pid = grant_id(d, (size_t)pi);
    static const char *const lists[] = {"tools", "recipients", "resources"};
    char f[256];
    for (size_t k = 0; k < 3; k++) {
        const char *extra = not_subset(json_object_get(g, lists[k]), json_object_get(pg, lists[k]));
        if (extra != NULL) {
            snprintf(f, sizeof f, "grants[%zu].%s", i, lists[k]);
            return fail(e, f, "\"%s\" is not in the parent grant %s's %s (widening)", extra, pid,
                        lists[k]);
        }
    }
    long long from, to, pfrom, pto;
    const char *sfrom = json_string_value(json_object_get(g, "valid_from"));
    const char *sto = json_string_value(json_object_get(g, "valid_to"));
    const char *spfrom = json_string_value(json_object_get(pg, "valid_from"));
    const char *spto = json_string_value(json_object_get(pg, "valid_to"));
    if (parse_time(sfrom, &from) != 0 || parse_time(sto, &to) != 0 ||
        parse_time(spfrom, &pfrom) != 0 || parse_time(spto, &pto) != 0) {
        snprintf(f, sizeof f, "grants[%zu]", i);
        return fail(e, f, "validity window cannot be read");
    }
    if (from < pfrom) {
        snprintf(f, sizeof f, "grants[%zu].valid_from", i);
        return fail(e, f, "%s is before the parent grant %s's valid_from %s (widening)", sfrom, pid,
                    spfrom);
    }
    if (to > pto) {
        snprintf(f, sizeof f, "grants[%zu].valid_to", i);
        return fail(e, f, "%s is after the parent grant %s's valid_to %s (widening)", sto, pid,
                    spto);
    }
    /* Budget ceilings only come down a chain: a stated ceiling may not exceed any ancestor's
     * (a ceiling left out is the ancestors' lowest). */
    for (size_t k = 0; k < WORKFLOW_N_BUDGETS; k++) {
        const json_t *mine = json_object_get(json_object_get(g, "budget"), budget_names[k]);
        if (mine == NULL) {
            continue;
        }
        for (long at = pi; at >= 0; at = grant_parent(d, (size_t)at)) {
            const json_t *up = json_object_get(
                json_object_get(json_array_get(d->grants, (size_t)at), "budget"), budget_names[k]);
            if (up != NULL && json_integer_value(mine) > json_integer_value(up)) {
                snprintf(f, sizeof f, "grants[%zu].budget.%s", i, budget_names[k]);
                return fail(e, f, "%lld is above the grant %s's ceiling %lld (widening)",
                            (long long)json_integer_value(mine), grant_id(d, (size_t)at),
                            (long long)json_integer_value(up));
            }
        }
    }
    return 0;
}

/* grants[i].delegated_from, when set, names a grant of the definition. */
static int check_grant_parent(const wdef *d, size_t i, werr *e)
{
    const json_t *p = json_object_get(json_array_get(d->grants, i), "delegated_from");
    if (p != NULL && find_entry(d->grants, "id", json_string_value(p)) < 0) {
        char f[256];
        snprintf(f, sizeof f, "grants[%zu].delegated_from", i);
        return fail(e, f, "unknown grant \"%s\"", json_string_value(p));
    }
    return 0;
}

/* The grants in four passes, each over every grant: fields, parents, cycles, widening. A pass
 * relies on the one before having held for every grant (a parent is resolved before a chain is
 * walked, and a chain is walked only when it ends), so a pass with a problem ends the part. */
static int check_grants(const wdef *d, werr *e)
{
    size_t n = json_array_size(d->grants);
    if (check_count(d->grants, "grants", WORKFLOW_MAX_GRANTS, e) != 0) {
        return -1;
    }
    int (*const passes[])(const wdef *, size_t, werr *) = {check_grant_fields, check_grant_parent,
                                                           check_grant_cycle, check_grant_widening};
    for (size_t k = 0; k < sizeof passes / sizeof passes[0]; k++) {
        bool bad = false;
        for (size_t i = 0; i < n; i++) {
            if (part_ends(passes[k](d, i, e), &bad, e)) {
                return -1;
            }
        }
        if (bad) {
            return -1;
        }
    }
    return 0;
}

/* ---- public templates -------------------------------------------------------------------- */

/* Finds the next placeholder of t at or after *pos: returns 1 with [*start, *end) the whole
 * "{name}" and the name in [name, name + name_len); 0 when none is left; -1 when a brace does
 * not form a placeholder {id} (at byte *start). */
static int next_placeholder(const char *t, size_t *pos, size_t *start, size_t *end,
                            const char **name, size_t *name_len)
{
    size_t i = *pos;
    while (t[i] != '\0' && t[i] != '{' && t[i] != '}') {
        i++;
    }
    if (t[i] == '\0') {
        *pos = i;
        return 0;
    }
    *start = i;
    if (t[i] == '}') {
        return -1;
    }
    size_t j = i + 1;
    while (t[j] != '\0' && t[j] != '}' && t[j] != '{') {
        j++;
    }
    if (t[j] != '}' || j - i - 1 == 0 || j - i - 1 > WORKFLOW_ID_MAX) {
        return -1;
    }
    for (size_t k = i + 1; k < j; k++) {
        char c = t[k];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-')) {
            return -1;
        }
    }
    *name = t + i + 1;
    *name_len = j - i - 1;
    *end = j + 1;
    *pos = j + 1;
    return 1;
}

/* The declared field of fields whose name is [name, name + len), or NULL. */
static json_t *field_named(const json_t *fields, const char *name, size_t len)
{
    char key[WORKFLOW_ID_MAX + 1];
    if (len > WORKFLOW_ID_MAX) {
        return NULL;
    }
    memcpy(key, name, len);
    key[len] = '\0';
    return json_object_get(fields, key);
}

static int check_public(const json_t *s, const char *p, werr *e)
{
    const json_t *fields = json_object_get(s, "public_fields");
    const json_t *tmpl = json_object_get(s, "public_template");
    char f[256];
    if (fields == NULL && tmpl == NULL) {
        return 0;
    }
    if (fields == NULL || tmpl == NULL) {
        /* The path names the field that is present; the message the one that is missing. */
        snprintf(f, sizeof f, "%s.%s", p, fields == NULL ? "public_template" : "public_fields");
        return fail(e, f, "public_fields and public_template go together (%s is missing)",
                    fields == NULL ? "public_fields" : "public_template");
    }
    snprintf(f, sizeof f, "%s.public_fields", p);
    if (json_object_size(fields) > WORKFLOW_MAX_PUBLIC_FIELDS) {
        return fail(e, f, "%zu fields, at most %d (limit)", json_object_size(fields),
                    WORKFLOW_MAX_PUBLIC_FIELDS);
    }
    const char *key;
    json_t *vals;
    json_object_foreach((json_t *)fields, key, vals)
    {
        snprintf(f, sizeof f, "%s.public_fields.%.64s", p, key);
        if (!id_valid(key)) {
            return fail(e, f,
                        "field name is not a valid id (1..64 characters of A-Z a-z 0-9 . _ -)");
        }
        if (!json_is_array(vals) || json_array_size(vals) == 0) {
            return fail(e, f, "must be a non-empty list of allowed values");
        }
        if (json_array_size(vals) > WORKFLOW_MAX_PUBLIC_VALUES) {
            return fail(e, f, "%zu allowed values, at most %d (limit)", json_array_size(vals),
                        WORKFLOW_MAX_PUBLIC_VALUES);
        }
        for (size_t k = 0; k < json_array_size(vals); k++) {
            char fk[320];
            snprintf(fk, sizeof fk, "%s[%zu]", f, k);
            const json_t *v = json_array_get(vals, k);
            if (check_text(v, fk, WORKFLOW_MAX_TITLE_BYTES, true, e) != 0) {
                return -1;
            }
            for (size_t j = 0; j < k; j++) {
                if (json_equal(v, json_array_get(vals, j))) {
                    return fail(e, f, "\"%s\" is listed twice", json_string_value(v));
                }
            }
        }
    }
    snprintf(f, sizeof f, "%s.public_template", p);
    if (check_text(tmpl, f, WORKFLOW_MAX_TEXT_BYTES, true, e) != 0) {
        return -1;
    }
    const char *t = json_string_value(tmpl);
    size_t pos = 0, start = 0, end = 0, len = 0;
    const char *name = NULL;
    int r;
    while ((r = next_placeholder(t, &pos, &start, &end, &name, &len)) == 1) {
        if (field_named(fields, name, len) == NULL) {
            return fail(e, f, "placeholder {%.*s} is not a declared public field", (int)len, name);
        }
    }
    if (r < 0) {
        return fail(e, f, "the brace at byte %zu does not form a placeholder {field}", start);
    }
    return 0;
}

static int check_script(const json_t *s, const char *p, werr *e)
{
    const json_t *script = json_object_get(s, "script");
    char f[256];
    if (script == NULL) {
        return 0;
    }
    snprintf(f, sizeof f, "%s.script", p);
    if (check_object(script, f, script_spec, N_SPEC(script_spec), e) != 0) {
        return -1;
    }
    snprintf(f, sizeof f, "%s.script.content", p);
    if (check_text(json_object_get(script, "content"), f, WORKFLOW_MAX_CONTENT_BYTES, false, e) !=
        0) {
        return -1;
    }
    const json_t *fields = json_object_get(script, "fields");
    if (fields != NULL) {
        snprintf(f, sizeof f, "%s.script.fields", p);
        if (json_object_size(fields) > WORKFLOW_MAX_PUBLIC_FIELDS) {
            return fail(e, f, "%zu fields, at most %d (limit)", json_object_size(fields),
                        WORKFLOW_MAX_PUBLIC_FIELDS);
        }
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)fields, key, v)
        {
            snprintf(f, sizeof f, "%s.script.fields.%.64s", p, key);
            if (check_text(v, f, WORKFLOW_MAX_CONTENT_BYTES, false, e) != 0) {
                return -1;
            }
        }
    }
    const json_t *handoff = json_object_get(script, "handoff");
    if (handoff != NULL) {
        snprintf(f, sizeof f, "%s.script.handoff", p);
        if (check_id_list(handoff, f, 2, e) != 0) {
            return -1;
        }
        size_t k;
        json_t *v;
        json_array_foreach(handoff, k, v)
        {
            if (strcmp(json_string_value(v), "output") != 0 &&
                strcmp(json_string_value(v), "inputs") != 0) {
                return fail(e, f, "\"%s\" is not one of output, inputs", json_string_value(v));
            }
        }
    }
    return 0;
}

/* One step: shape, actor and grant, its allowlists within its grant, reads, receives, deliver,
 * public rendering and script. *recovery_at is the index of an earlier recovery step or -1. */
static int check_step(const wdef *d, size_t i, long *recovery_at, werr *e)
{
    const json_t *s = json_array_get(d->steps, i);
    char p[64], f[256];
    snprintf(p, sizeof p, "steps[%zu]", i);
    if (check_object(s, p, step_spec, N_SPEC(step_spec), e) != 0) {
        return -1;
    }
    if (check_entry_id(d->steps, "steps", i, "name", "step", e) != 0) {
        return -1;
    }
    const char *actor = json_string_value(json_object_get(s, "actor"));
    snprintf(f, sizeof f, "%s.actor", p);
    if (find_entry(d->actors, "id", actor) < 0) {
        return fail(e, f, "unknown actor \"%.64s\"", actor);
    }
    const char *gid = json_string_value(json_object_get(s, "grant"));
    snprintf(f, sizeof f, "%s.grant", p);
    long gi = find_entry(d->grants, "id", gid);
    if (gi < 0) {
        return fail(e, f, "unknown grant \"%.64s\"", gid);
    }
    const json_t *g = json_array_get(d->grants, (size_t)gi);
    const char *grantee = json_string_value(json_object_get(g, "grantee"));
    if (strcmp(grantee, actor) != 0) {
        return fail(e, f, "grant %s is granted to %s, not to the step's actor %s", gid, grantee,
                    actor);
    }
    static const char *const lists[] = {"tools", "recipients", "resources"};
    static const size_t maxima[] = {WORKFLOW_MAX_TOOLS, WORKFLOW_MAX_RECIPIENTS,
                                    WORKFLOW_MAX_RESOURCES};
    const json_t *refs[] = {NULL, d->recipients, d->resources};
    static const char *const nouns[] = {"tool", "recipient", "resource"};
    for (size_t k = 0; k < 3; k++) {
        const json_t *list = json_object_get(s, lists[k]);
        snprintf(f, sizeof f, "%s.%s", p, lists[k]);
        if (check_id_list(list, f, maxima[k], e) != 0) {
            return -1;
        }
        if (refs[k] != NULL && check_refs(list, f, refs[k], nouns[k], e) != 0) {
            return -1;
        }
        const char *extra = not_subset(list, json_object_get(g, lists[k]));
        if (extra != NULL) {
            return fail(e, f, "\"%s\" is not in the step's grant %s's %s", extra, gid, lists[k]);
        }
    }
    snprintf(f, sizeof f, "%s.reads", p);
    const json_t *reads = json_object_get(s, "reads");
    if (check_id_list(reads, f, WORKFLOW_MAX_RESOURCES, e) != 0) {
        return -1;
    }
    const char *extra = not_subset(reads, json_object_get(s, "resources"));
    if (extra != NULL) {
        return fail(e, f, "\"%s\" is not in the step's resources", extra);
    }
    snprintf(f, sizeof f, "%s.receives", p);
    const json_t *receives = json_object_get(s, "receives");
    if (check_id_list(receives, f, WORKFLOW_MAX_STEPS, e) != 0) {
        return -1;
    }
    size_t k;
    json_t *v;
    json_array_foreach(receives, k, v)
    {
        long at = find_entry(d->steps, "name", json_string_value(v));
        if (at < 0 || (size_t)at >= i) {
            return fail(e, f, "\"%s\" is not an earlier step", json_string_value(v));
        }
    }
    snprintf(f, sizeof f, "%s.output_title", p);
    if (check_text(json_object_get(s, "output_title"), f, WORKFLOW_MAX_TITLE_BYTES, true, e) != 0) {
        return -1;
    }
    const json_t *deliver = json_object_get(s, "deliver");
    if (deliver != NULL) {
        snprintf(f, sizeof f, "%s.deliver", p);
        if (check_object(deliver, f, deliver_spec, N_SPEC(deliver_spec), e) != 0) {
            return -1;
        }
        const char *tool = json_string_value(json_object_get(deliver, "tool"));
        const char *rcp = json_string_value(json_object_get(deliver, "recipient"));
        if (!list_has(json_object_get(s, "tools"), tool)) {
            snprintf(f, sizeof f, "%s.deliver.tool", p);
            return fail(e, f, "\"%.64s\" is not in the step's tools", tool);
        }
        if (!list_has(json_object_get(s, "recipients"), rcp)) {
            snprintf(f, sizeof f, "%s.deliver.recipient", p);
            return fail(e, f, "\"%.64s\" is not in the step's recipients", rcp);
        }
    }
    if (json_is_true(json_object_get(s, "recovery"))) {
        if (*recovery_at >= 0) {
            snprintf(f, sizeof f, "%s.recovery", p);
            return fail(e, f, "only one step may be the recovery step (steps[%ld] already is)",
                        *recovery_at);
        }
        *recovery_at = (long)i;
    }
    if (check_public(s, p, e) != 0) {
        return -1;
    }
    return check_script(s, p, e);
}

/* The built-in runner reads a step's reads from their registered content: an observed
 * resource has none (a host records it with Gate/ObserveSource). */
static int check_step_reads(const wdef *d, size_t i, werr *e)
{
    const json_t *reads = json_object_get(json_array_get(d->steps, i), "reads");
    for (size_t k = 0; k < json_array_size(reads); k++) {
        const char *id = json_string_value(json_array_get(reads, k));
        long ri = find_entry(d->resources, "id", id);
        if (ri >= 0 && json_object_get(json_array_get(d->resources, (size_t)ri), "observed")) {
            char p[64];
            snprintf(p, sizeof p, "steps[%zu].reads", i);
            return fail(e, p,
                        "\"%s\" is an observed resource: a host records what it read with "
                        "ObserveSource",
                        id);
        }
    }
    return 0;
}

static int check_steps(const wdef *d, werr *e)
{
    if (check_count(d->steps, "steps", WORKFLOW_MAX_STEPS, e) != 0) {
        return -1;
    }
    long recovery_at = -1;
    bool bad = false;
    for (size_t i = 0; i < json_array_size(d->steps); i++) {
        int rc = check_step(d, i, &recovery_at, e);
        if (part_ends(rc == 0 ? check_step_reads(d, i, e) : rc, &bad, e)) {
            return -1;
        }
    }
    return bad ? -1 : 0;
}

/* ---- expected decisions ------------------------------------------------------------------ */

static const char *const expect_kinds[] = {"event", "recover", "status", "delivery", NULL};
static const char *const expect_events[] = {
    "input_checked",  "delivery_decided", "source_read",    "output_recorded",
    "output_refused", "source_observed",  "invoke_decided", NULL};
#define EXPECT_EVENT_NAMES                                                                         \
    "input_checked, delivery_decided, source_read, output_recorded, output_refused, "              \
    "source_observed, invoke_decided"
static const char *const outcome_names[] = {"allow", "deny", "unknown", NULL};
/* Every status a run can enter (RUN_STATUSES, queries/library.lua). */
static const char *const status_names[] = {
    "created", "queued",      "running",   "blocked",          "recovering",       "completed",
    "error",   "interrupted", "cancelled", "budget_exhausted", "pending_approval", NULL};

/* outcome, codes and witness of an event or recover expectation at path p. */
static int check_expected_decision(const json_t *x, const char *p, werr *e)
{
    char f[256];
    snprintf(f, sizeof f, "%s.outcome", p);
    const json_t *outcome = json_object_get(x, "outcome");
    if (check_enum(outcome, f, outcome_names, "allow, deny, unknown", e) != 0) {
        return -1;
    }
    bool allow = strcmp(json_string_value(outcome), "allow") == 0;
    const json_t *codes = json_object_get(x, "codes");
    if (codes != NULL) {
        snprintf(f, sizeof f, "%s.codes", p);
        if (allow) {
            return fail(e, f, "an allow carries no codes (leave codes out)");
        }
        if (check_id_list(codes, f, GUARD_CODE_COUNT, e) != 0) {
            return -1;
        }
        size_t i;
        json_t *c;
        json_array_foreach(codes, i, c)
        {
            bool known = false;
            for (int k = 0; k < GUARD_CODE_COUNT && !known; k++) {
                known = strcmp(json_string_value(c), decision_code_name((guard_code)k)) == 0;
            }
            if (!known) {
                char fi[288];
                snprintf(fi, sizeof fi, "%s[%zu]", f, i);
                return fail(e, fi, "\"%s\" is not a decision code (e.g. INPUT_OUT_OF_SCOPE)",
                            json_string_value(c));
            }
        }
    }
    const json_t *witness = json_object_get(x, "witness");
    if (witness != NULL) {
        snprintf(f, sizeof f, "%s.witness", p);
        if (allow) {
            return fail(e, f, "an allow carries no witness (leave witness out)");
        }
        if (check_text(witness, f, WORKFLOW_MAX_TEXT_BYTES, true, e) != 0) {
            return -1;
        }
    }
    return 0;
}

/* A list of at most max distinct non-empty strings of at most WORKFLOW_MAX_TITLE_BYTES. */
static int check_text_list(const json_t *list, const char *path, size_t max, werr *e)
{
    if (json_array_size(list) > max) {
        return fail(e, path, "%zu entries, at most %zu (limit)", json_array_size(list), max);
    }
    for (size_t i = 0; i < json_array_size(list); i++) {
        char p[320];
        snprintf(p, sizeof p, "%s[%zu]", path, i);
        const json_t *v = json_array_get(list, i);
        if (check_text(v, p, WORKFLOW_MAX_TITLE_BYTES, true, e) != 0) {
            return -1;
        }
        for (size_t j = 0; j < i; j++) {
            if (json_equal(v, json_array_get(list, j))) {
                return fail(e, path, "\"%s\" is listed twice", json_string_value(v));
            }
        }
    }
    return 0;
}

/* One expectation: exactly one kind key, the fields of that kind, and references that resolve
 * in the definition (steps, recipients, a recovery step to recover with). */
static int check_expectation(const json_t *doc, const wdef *d, size_t i, werr *e)
{
    const json_t *x = json_array_get(json_object_get(doc, "expect"), i);
    char p[64], f[256];
    snprintf(p, sizeof p, "expect[%zu]", i);
    if (!json_is_object(x)) {
        return fail(e, p, "must be an object");
    }
    int kind = -1;
    for (int k = 0; expect_kinds[k] != NULL; k++) {
        if (json_object_get(x, expect_kinds[k]) == NULL) {
            continue;
        }
        if (kind >= 0) {
            return fail(e, p,
                        "has both %s and %s; an expectation is one of event, recover, status, "
                        "delivery",
                        expect_kinds[kind], expect_kinds[k]);
        }
        kind = k;
    }
    if (kind < 0) {
        return fail(e, p, "needs one of event, recover, status, delivery");
    }
    switch (kind) {
    case 0: {
        if (check_object(x, p, expect_event_spec, N_SPEC(expect_event_spec), e) != 0) {
            return -1;
        }
        snprintf(f, sizeof f, "%s.step", p);
        const char *step = json_string_value(json_object_get(x, "step"));
        if (find_entry(d->steps, "name", step) < 0) {
            return fail(e, f, "\"%.64s\" is not a step of the definition", step);
        }
        snprintf(f, sizeof f, "%s.event", p);
        if (check_enum(json_object_get(x, "event"), f, expect_events, EXPECT_EVENT_NAMES, e) != 0) {
            return -1;
        }
        return check_expected_decision(x, p, e);
    }
    case 1: {
        if (check_object(x, p, expect_recover_spec, N_SPEC(expect_recover_spec), e) != 0) {
            return -1;
        }
        snprintf(f, sizeof f, "%s.recover", p);
        if (!json_is_true(json_object_get(x, "recover"))) {
            return fail(e, f, "must be true (an expectation with recover false expects nothing)");
        }
        bool has_recovery = false;
        size_t k;
        json_t *s;
        json_array_foreach(d->steps, k, s)
        {
            has_recovery = has_recovery || json_is_true(json_object_get(s, "recovery"));
        }
        if (!has_recovery) {
            return fail(e, f, "the definition has no recovery step (\"recovery\": true)");
        }
        return check_expected_decision(x, p, e);
    }
    case 2:
        if (check_object(x, p, expect_status_spec, N_SPEC(expect_status_spec), e) != 0) {
            return -1;
        }
        snprintf(f, sizeof f, "%s.status", p);
        return check_enum(json_object_get(x, "status"), f, status_names,
                          "created, queued, running, blocked, recovering, completed, error, "
                          "interrupted, cancelled, budget_exhausted, pending_approval",
                          e);
    default: {
        if (check_object(x, p, expect_delivery_spec, N_SPEC(expect_delivery_spec), e) != 0) {
            return -1;
        }
        snprintf(f, sizeof f, "%s.delivery", p);
        const json_t *rcp = json_object_get(x, "delivery");
        if (check_id(rcp, f, e) != 0) {
            return -1;
        }
        if (find_entry(d->recipients, "id", json_string_value(rcp)) < 0) {
            return fail(e, f, "unknown recipient \"%s\"", json_string_value(rcp));
        }
        static const char *const lists[] = {"includes", "excludes"};
        for (size_t k = 0; k < 2; k++) {
            const json_t *list = json_object_get(x, lists[k]);
            snprintf(f, sizeof f, "%s.%s", p, lists[k]);
            if (list != NULL && check_text_list(list, f, WORKFLOW_MAX_PUBLIC_FIELDS, e) != 0) {
                return -1;
            }
        }
        return 0;
    }
    }
}

static int check_expect(const json_t *doc, const wdef *d, werr *e)
{
    const json_t *expect = json_object_get(doc, "expect");
    if (expect == NULL) {
        return 0;
    }
    if (check_count(expect, "expect", WORKFLOW_MAX_EXPECT, e) != 0) {
        return -1;
    }
    bool bad = false;
    for (size_t i = 0; i < json_array_size(expect); i++) {
        if (part_ends(check_expectation(doc, d, i, e), &bad, e)) {
            return -1;
        }
    }
    return bad ? -1 : 0;
}

/* ---- human approval ---------------------------------------------------------------------- */

/* An approval object at path p: {"by": a human actor of the workflow, "within_ms": the time the
 * approver has, WORKFLOW_APPROVAL_MIN_MS..WORKFLOW_APPROVAL_MAX_MS}. */
static int check_approval(const wdef *d, const json_t *a, const char *p, werr *e)
{
    char f[384];
    if (check_object(a, p, approval_spec, N_SPEC(approval_spec), e) != 0) {
        return -1;
    }
    snprintf(f, sizeof f, "%s.by", p);
    const json_t *by = json_object_get(a, "by");
    if (check_id(by, f, e) != 0) {
        return -1;
    }
    long ai = find_entry(d->actors, "id", json_string_value(by));
    if (ai < 0) {
        return fail(e, f, "unknown actor \"%s\"", json_string_value(by));
    }
    const char *kind =
        json_string_value(json_object_get(json_array_get(d->actors, (size_t)ai), "kind"));
    if (kind == NULL || strcmp(kind, "human") != 0) {
        return fail(e, f, "\"%s\" is not a human actor: only a human approves",
                    json_string_value(by));
    }
    snprintf(f, sizeof f, "%s.within_ms", p);
    json_int_t ms = json_integer_value(json_object_get(a, "within_ms"));
    if (ms < WORKFLOW_APPROVAL_MIN_MS || ms > WORKFLOW_APPROVAL_MAX_MS) {
        return fail(e, f, "%lld is outside %d..%d milliseconds", (long long)ms,
                    WORKFLOW_APPROVAL_MIN_MS, WORKFLOW_APPROVAL_MAX_MS);
    }
    return 0;
}

/* True when some grant or step lists tool. */
static bool tool_known(const wdef *d, const char *tool)
{
    for (size_t i = 0; i < json_array_size(d->grants); i++) {
        if (list_has(json_object_get(json_array_get(d->grants, i), "tools"), tool)) {
            return true;
        }
    }
    for (size_t i = 0; i < json_array_size(d->steps); i++) {
        if (list_has(json_object_get(json_array_get(d->steps, i), "tools"), tool)) {
            return true;
        }
    }
    return false;
}

/* The approval object tool or recipient asks for, or NULL. */
static const json_t *approval_of(const json_t *doc, const json_t *recipients, const char *tool,
                                 const char *recipient)
{
    if (tool != NULL) {
        return json_object_get(json_object_get(json_object_get(doc, "tools"), tool), "approval");
    }
    long ri = find_entry(recipients, "id", recipient);
    return ri < 0 ? NULL : json_object_get(json_array_get(recipients, (size_t)ri), "approval");
}

static const char *const role_names[] = {"data", "control", NULL};

/* The arguments of live tool t (at p): at most WORKFLOW_MAX_ARGUMENTS, each {name: an id used
 * once, role: data or control}. */
static int check_arguments(const json_t *args, const char *p, werr *e)
{
    char f[256];
    if (json_array_size(args) > WORKFLOW_MAX_ARGUMENTS) {
        snprintf(f, sizeof f, "%s.arguments", p);
        return fail(e, f, "%zu entries, at most %d (limit)", json_array_size(args),
                    WORKFLOW_MAX_ARGUMENTS);
    }
    for (size_t i = 0; i < json_array_size(args); i++) {
        const json_t *a = json_array_get(args, i);
        snprintf(f, sizeof f, "%s.arguments[%zu]", p, i);
        char q[288];
        snprintf(q, sizeof q, "%s.name", f);
        if (check_object(a, f, argument_spec, N_SPEC(argument_spec), e) != 0 ||
            check_id(json_object_get(a, "name"), q, e) != 0) {
            return -1;
        }
        const char *name = json_string_value(json_object_get(a, "name"));
        for (size_t j = 0; j < i; j++) {
            if (strcmp(json_string_value(json_object_get(json_array_get(args, j), "name")), name) ==
                0) {
                return fail(e, f, "argument \"%s\" is declared twice", name);
            }
        }
        snprintf(q, sizeof q, "%s.role", f);
        if (check_enum(json_object_get(a, "role"), q, role_names, "data, control", e) != 0) {
            return -1;
        }
    }
    return 0;
}

/* The role of argument name of live tool t, or NULL when t declares no such argument. */
static const char *argument_role(const json_t *t, const char *name)
{
    const json_t *args = json_object_get(t, "arguments");
    for (size_t i = 0; i < json_array_size(args); i++) {
        const json_t *a = json_array_get(args, i);
        if (strcmp(json_string_value(json_object_get(a, "name")), name) == 0) {
            return json_string_value(json_object_get(a, "role"));
        }
    }
    return NULL;
}

/* A live tool's destination (a control argument, required when a data argument leaves through
 * the tool) and result (an observed resource the tool's result is recorded under). */
static int check_tool_ends(const wdef *d, const json_t *t, const char *p, werr *e)
{
    char f[192];
    const json_t *dest = json_object_get(t, "destination");
    bool has_data = false;
    const json_t *args = json_object_get(t, "arguments");
    for (size_t i = 0; i < json_array_size(args); i++) {
        has_data |= strcmp(json_string_value(json_object_get(json_array_get(args, i), "role")),
                           "data") == 0;
    }
    snprintf(f, sizeof f, "%s.destination", p);
    if (dest == NULL && has_data) {
        return fail(e, f,
                    "a tool with a data argument names the control argument its "
                    "destination is matched from");
    }
    const char *role = dest != NULL ? argument_role(t, json_string_value(dest)) : "control";
    if (role == NULL || strcmp(role, "control") != 0) {
        return fail(e, f, "\"%.64s\" is not a control argument of the tool",
                    json_string_value(dest));
    }
    /* Where the values go: the destination class matched, or for a tool without a
     * destination the tool's server, whose clearance the tool declares. */
    const json_t *clearance = json_object_get(t, "clearance");
    snprintf(f, sizeof f, "%s.clearance", p);
    if (clearance != NULL && dest != NULL) {
        return fail(e, f,
                    "a tool with a destination sends its values to the destination class "
                    "matched, whose clearance holds them");
    }
    if (clearance != NULL &&
        check_enum(clearance, f, conf_names, "public, internal, confidential", e) != 0) {
        return -1;
    }
    const json_t *res = json_object_get(t, "result");
    if (res == NULL) {
        return 0;
    }
    snprintf(f, sizeof f, "%s.result", p);
    long ri = find_entry(d->resources, "id", json_string_value(res));
    if (ri < 0 || json_object_get(json_array_get(d->resources, (size_t)ri), "observed") == NULL) {
        return fail(e, f, "\"%.64s\" is not an observed resource", json_string_value(res));
    }
    return 0;
}

/* ---- downstream MCP servers -------------------------------------------------------------- */

/* An MCP tool name (1..128 characters of A-Z a-z 0-9 _ - . /), as the MCP specification's
 * tool names; the names of a downstream server's tools are matched against it exactly. */
static int check_downstream_name(const json_t *v, const char *path, werr *e)
{
    if (check_text(v, path, WORKFLOW_MAX_TOOL_NAME_BYTES, true, e) != 0) {
        return -1;
    }
    for (const char *c = json_string_value(v); *c != '\0'; c++) {
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '-' || *c == '.' || *c == '/')) {
            return fail(e, path,
                        "\"%.128s\" is not a tool name (1..128 characters of A-Z a-z 0-9 _ - . /)",
                        json_string_value(v));
        }
    }
    return 0;
}

/* Whether n is an environment variable name ([A-Za-z_][A-Za-z0-9_]*). */
static bool env_name_ok(const char *n)
{
    bool ok = n[0] != '\0' && !(n[0] >= '0' && n[0] <= '9');
    for (const char *c = n; ok && *c != '\0'; c++) {
        ok = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
             *c == '_';
    }
    return ok;
}

/* Whether a variable is one of charter's own (CHARTER_TOKEN, CHARTER_OPERATOR_TOKEN, ...):
 * charter's credentials never go to a downstream server, so no definition may hand them on. */
static bool env_name_charters(const char *name)
{
    return strncmp(name, "CHARTER_", 8) == 0;
}

/* env_from (at p): distinct names of environment variables ([A-Za-z_][A-Za-z0-9_]*), none of
 * charter's own. */
static int check_env_from(const json_t *list, const char *p, werr *e)
{
    if (check_text_list(list, p, WORKFLOW_MAX_SERVER_ARGS, e) != 0) {
        return -1;
    }
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *n = json_string_value(json_array_get(list, i));
        char f[320];
        snprintf(f, sizeof f, "%s[%zu]", p, i);
        if (!env_name_ok(n)) {
            return fail(e, f, "\"%.64s\" is not an environment variable name", n);
        }
        if (env_name_charters(n)) {
            return fail(e, f,
                        "\"%.64s\" is one of charter's own variables (CHARTER_*), never "
                        "handed to a server",
                        n);
        }
    }
    return 0;
}

/* A server's url (at p): http:// or https://, a host, printable ASCII without spaces, and no
 * user or password before the host: a credential is never written in the definition. */
static int check_server_url(const json_t *v, const char *p, werr *e)
{
    if (check_text(v, p, WORKFLOW_MAX_TEXT_BYTES, true, e) != 0) {
        return -1;
    }
    const char *u = json_string_value(v);
    for (const char *c = u; *c != '\0'; c++) {
        if (*c <= 0x20 || *c >= 0x7f) {
            return fail(e, p, "\"%.128s\" holds a space or a character outside printable ASCII", u);
        }
    }
    size_t scheme = strncasecmp(u, "http://", 7) == 0    ? 7
                    : strncasecmp(u, "https://", 8) == 0 ? 8
                                                         : 0;
    if (scheme == 0) {
        return fail(e, p, "\"%.128s\" is not an http:// or https:// URL", u);
    }
    size_t host = strcspn(u + scheme, "/?#");
    if (host == 0) {
        return fail(e, p, "\"%.128s\" names no host", u);
    }
    if (memchr(u + scheme, '@', host) != NULL) {
        return fail(e, p,
                    "holds a user or password: name the credential with credential_env or "
                    "credential_file, never in the definition");
    }
    return 0;
}

/* The fields of one kind of server (at p) that the other kind's has: each refused by name. */
static int check_server_kind(const json_t *sv, const char *p, werr *e)
{
    bool url = json_object_get(sv, "url") != NULL;
    char f[256];
    if (url == (json_object_get(sv, "command") != NULL)) {
        snprintf(f, sizeof f, "%s.%s", p, url ? "url" : "command");
        return fail(e, f,
                    url ? "a server has a command or a url, not both"
                        : "required field is missing (a server has a command, run over stdio, "
                          "or a url, spoken to over Streamable HTTP)");
    }
    static const char *const stdio_only[] = {"args", "env_from"};
    static const char *const http_only[] = {"credential_env", "credential_file"};
    const char *const *other = url ? stdio_only : http_only;
    for (size_t i = 0; i < 2; i++) {
        if (json_object_get(sv, other[i]) != NULL) {
            snprintf(f, sizeof f, "%s.%s", p, other[i]);
            return fail(e, f, "is for a server with %s", url ? "a command" : "a url");
        }
    }
    return 0;
}

/* Where a url server's bearer token is found (at p): one variable of charter-mcp's own
 * environment, or one file given by its absolute path; never the token itself. */
static int check_server_credential(const json_t *sv, const char *p, werr *e)
{
    const json_t *env = json_object_get(sv, "credential_env");
    const json_t *file = json_object_get(sv, "credential_file");
    char f[256];
    snprintf(f, sizeof f, "%s.%s", p, file != NULL ? "credential_file" : "credential_env");
    if (env != NULL && file != NULL) {
        return fail(e, f, "a server names credential_env or credential_file, not both");
    }
    if (env != NULL && !env_name_ok(json_string_value(env))) {
        return fail(e, f, "\"%.64s\" is not an environment variable name", json_string_value(env));
    }
    if (env != NULL && env_name_charters(json_string_value(env))) {
        return fail(e, f,
                    "\"%.64s\" is one of charter's own variables (CHARTER_*), never sent to a "
                    "server",
                    json_string_value(env));
    }
    if (file == NULL) {
        return 0;
    }
    if (check_text(file, f, WORKFLOW_MAX_TEXT_BYTES, true, e) != 0) {
        return -1;
    }
    if (json_string_value(file)[0] != '/') {
        return fail(e, f, "\"%.128s\" is not an absolute path", json_string_value(file));
    }
    return 0;
}

/* A server's timeout_ms (at p), when given: 1 to 600000 milliseconds. */
static int check_server_timeout(const json_t *sv, const char *p, werr *e)
{
    const json_t *t = json_object_get(sv, "timeout_ms");
    char f[256];
    snprintf(f, sizeof f, "%s.timeout_ms", p);
    if (t != NULL && (json_integer_value(t) < 1 || json_integer_value(t) > 600000)) {
        return fail(e, f, "%lld is not from 1 to 600000 (milliseconds)",
                    (long long)json_integer_value(t));
    }
    return 0;
}

/* One server (at p): a command, its arguments and the variables it is given, or a url and
 * where its credential is found; and its timeout. */
static int check_server(const json_t *sv, const char *p, werr *e)
{
    char f[256];
    if (check_object(sv, p, server_spec, N_SPEC(server_spec), e) != 0 ||
        check_server_kind(sv, p, e) != 0 || check_server_timeout(sv, p, e) != 0) {
        return -1;
    }
    if (json_object_get(sv, "url") != NULL) {
        snprintf(f, sizeof f, "%s.url", p);
        return check_server_url(json_object_get(sv, "url"), f, e) != 0 ||
                       check_server_credential(sv, p, e) != 0
                   ? -1
                   : 0;
    }
    snprintf(f, sizeof f, "%s.command", p);
    if (check_text(json_object_get(sv, "command"), f, WORKFLOW_MAX_TEXT_BYTES, true, e) != 0) {
        return -1;
    }
    const json_t *args = json_object_get(sv, "args");
    snprintf(f, sizeof f, "%s.args", p);
    if (json_array_size(args) > WORKFLOW_MAX_SERVER_ARGS) {
        return fail(e, f, "%zu entries, at most %d (limit)", json_array_size(args),
                    WORKFLOW_MAX_SERVER_ARGS);
    }
    for (size_t i = 0; i < json_array_size(args); i++) {
        snprintf(f, sizeof f, "%s.args[%zu]", p, i);
        if (check_text(json_array_get(args, i), f, WORKFLOW_MAX_TEXT_BYTES, false, e) != 0) {
            return -1;
        }
    }
    snprintf(f, sizeof f, "%s.env_from", p);
    const json_t *env = json_object_get(sv, "env_from");
    return env != NULL ? check_env_from(env, f, e) : 0;
}

static int check_servers(const wdef *d, werr *e)
{
    if (json_object_size(d->servers) > WORKFLOW_MAX_SERVERS) {
        return fail(e, "servers", "%zu entries, at most %d (limit)", json_object_size(d->servers),
                    WORKFLOW_MAX_SERVERS);
    }
    const char *name;
    json_t *sv;
    json_object_foreach((json_t *)d->servers, name, sv)
    {
        char p[160];
        snprintf(p, sizeof p, "servers.%.64s", name);
        json_t *id = json_string(name);
        int rc = id == NULL ? fail(e, p, "out of memory") : check_id(id, p, e);
        json_decref(id);
        if (rc != 0 || check_server(sv, p, e) != 0) {
            return -1;
        }
    }
    return 0;
}

/* A live tool's mapping onto a downstream server's tool (at p): both server and
 * downstream_tool, the server one of "servers". */
static int check_tool_server(const wdef *d, const json_t *t, const char *p, werr *e)
{
    const json_t *server = json_object_get(t, "server");
    const json_t *dt = json_object_get(t, "downstream_tool");
    char f[192];
    if (server == NULL && dt == NULL) {
        return 0;
    }
    snprintf(f, sizeof f, "%s.%s", p, server == NULL ? "server" : "downstream_tool");
    if (server == NULL || dt == NULL) {
        return fail(e, f,
                    "required field is missing (a tool of a server names both server and "
                    "downstream_tool)");
    }
    snprintf(f, sizeof f, "%s.server", p);
    if (json_object_get(d->servers, json_string_value(server)) == NULL) {
        return fail(e, f, "\"%.64s\" is not one of the definition's servers",
                    json_string_value(server));
    }
    snprintf(f, sizeof f, "%s.downstream_tool", p);
    return check_downstream_name(dt, f, e);
}

static int check_tool_approval(const wdef *d, const char *tool, const json_t *t, werr *e)
{
    char p[160];
    snprintf(p, sizeof p, "tools.%.64s", tool);
    json_t *name = json_string(tool);
    int rc = name == NULL ? fail(e, p, "out of memory") : check_id(name, p, e);
    json_decref(name);
    if (rc != 0 || check_object(t, p, tool_spec, N_SPEC(tool_spec), e) != 0) {
        return -1;
    }
    if (!tool_known(d, tool)) {
        return fail(e, p, "no grant or step lists the tool \"%s\"", tool);
    }
    char f[192];
    const json_t *args = json_object_get(t, "arguments");
    size_t approvals = json_object_get(t, "approval") != NULL ? 1 : 0;
    if (args == NULL && json_object_size(t) != approvals) {
        snprintf(f, sizeof f, "%s.arguments", p);
        return fail(e, f,
                    "required field is missing (effect, destination, clearance, result, server "
                    "and downstream_tool are for a tool with arguments)");
    }
    if (args != NULL && (check_arguments(args, p, e) != 0 || check_tool_ends(d, t, p, e) != 0 ||
                         check_tool_server(d, t, p, e) != 0)) {
        return -1;
    }
    const json_t *a = json_object_get(t, "approval");
    snprintf(f, sizeof f, "%s.approval", p);
    if (a == NULL && args == NULL) {
        return fail(e, f, "required field is missing");
    }
    return a == NULL ? 0 : check_approval(d, a, f, e);
}

/* Step i may not combine a tool and a recipient whose approvals name two humans. */
static int check_step_approver(const json_t *doc, const wdef *d, size_t i, werr *e)
{
    const json_t *s = json_array_get(d->steps, i);
    const json_t *st = json_object_get(s, "tools"), *sr = json_object_get(s, "recipients");
    for (size_t a = 0; a < json_array_size(st); a++) {
        const json_t *ta =
            approval_of(doc, d->recipients, json_string_value(json_array_get(st, a)), NULL);
        for (size_t b = 0; ta != NULL && b < json_array_size(sr); b++) {
            const json_t *ra =
                approval_of(doc, d->recipients, NULL, json_string_value(json_array_get(sr, b)));
            const char *tb = json_string_value(json_object_get(ta, "by"));
            const char *rb = json_string_value(json_object_get(ra, "by"));
            if (ra != NULL && tb != NULL && rb != NULL && strcmp(tb, rb) != 0) {
                char p[64];
                snprintf(p, sizeof p, "steps[%zu]", i);
                return fail(e, p,
                            "tool \"%s\" asks approval by %s and recipient \"%s\" by %s: "
                            "a send is approved by one human",
                            json_string_value(json_array_get(st, a)), tb,
                            json_string_value(json_array_get(sr, b)), rb);
            }
        }
    }
    return 0;
}

/* Every approval of the definition: recipients' and tools' (a tool named in "tools" must be
 * one some grant or step lists). A step that may send with a tool and to a recipient that both
 * ask for approval must name one approver in both: the approval of a send is one human's. */
static int check_approvals(const json_t *doc, const wdef *d, werr *e)
{
    bool bad = false;
    for (size_t i = 0; i < json_array_size(d->recipients); i++) {
        const json_t *a = json_object_get(json_array_get(d->recipients, i), "approval");
        char p[64];
        snprintf(p, sizeof p, "recipients[%zu].approval", i);
        if (a != NULL && part_ends(check_approval(d, a, p, e), &bad, e)) {
            return -1;
        }
    }
    const char *tool;
    json_t *t;
    json_object_foreach(json_object_get(doc, "tools"), tool, t)
    {
        if (part_ends(check_tool_approval(d, tool, t, e), &bad, e)) {
            return -1;
        }
    }
    for (size_t i = 0; i < json_array_size(d->steps); i++) {
        if (part_ends(check_step_approver(doc, d, i, e), &bad, e)) {
            return -1;
        }
    }
    return bad ? -1 : 0;
}

/* ---- scripted live tools ----------------------------------------------------------------- */

/* The entry of observed resource id, or NULL when id names no observed resource. */
static const json_t *observed_resource(const wdef *d, const char *id)
{
    long ri = find_entry(d->resources, "id", id);
    const json_t *r = ri < 0 ? NULL : json_array_get(d->resources, (size_t)ri);
    return json_object_get(r, "observed") != NULL ? r : NULL;
}

/* One observation of a step's script (s, at p): an observed resource of the step's resources,
 * observed once in the script, a locator and content within the resource's max_bytes. */
static int check_script_observation(const wdef *d, const json_t *s, size_t k, const char *p,
                                    werr *e)
{
    const json_t *list = json_object_get(json_object_get(s, "script"), "observe");
    const json_t *o = json_array_get(list, k);
    char f[320];
    if (check_object(o, p, script_observe_spec, N_SPEC(script_observe_spec), e) != 0) {
        return -1;
    }
    snprintf(f, sizeof f, "%s.resource", p);
    const char *id = json_string_value(json_object_get(o, "resource"));
    const json_t *r = observed_resource(d, id);
    if (r == NULL) {
        return fail(e, f, "\"%.64s\" is not an observed resource", id);
    }
    if (!list_has(json_object_get(s, "resources"), id)) {
        return fail(e, f, "\"%.64s\" is not in the step's resources", id);
    }
    for (size_t j = 0; j < k; j++) {
        if (strcmp(json_string_value(json_object_get(json_array_get(list, j), "resource")), id) ==
            0) {
            return fail(e, f, "\"%.64s\" is observed twice in the script", id);
        }
    }
    snprintf(f, sizeof f, "%s.locator", p);
    if (check_plain(json_object_get(o, "locator"), f, WORKFLOW_MAX_TITLE_BYTES * 4, e) != 0) {
        return -1;
    }
    if (!workflow_one_line(json_string_value(json_object_get(o, "locator")))) {
        return fail(e, f, "holds a control character (where the bytes were read is one line)");
    }
    json_int_t max =
        json_integer_value(json_object_get(json_object_get(r, "observed"), "max_bytes"));
    snprintf(f, sizeof f, "%s.content", p);
    return check_text(json_object_get(o, "content"), f,
                      max < WORKFLOW_MAX_CONTENT_BYTES ? (size_t)max : WORKFLOW_MAX_CONTENT_BYTES,
                      true, e);
}

/* Whether step s reads id, or its script observes it: what a scripted value may quote. */
static bool script_source(const json_t *s, const char *id)
{
    const json_t *observe = json_object_get(json_object_get(s, "script"), "observe");
    for (size_t k = 0; k < json_array_size(observe); k++) {
        const char *r = json_string_value(json_object_get(json_array_get(observe, k), "resource"));
        if (r != NULL && strcmp(r, id) == 0) {
            return true;
        }
    }
    return list_has(json_object_get(s, "reads"), id);
}

/* One argument of a scripted invocation of live tool t (at p): a declared argument, a value,
 * and at most one origin: from_task (true), or quoted_from a resource the step reads or
 * observes. Without either, the value is one the model wrote. */
static int check_script_argument(const json_t *s, const json_t *t, const json_t *a, const char *p,
                                 werr *e)
{
    char f[384];
    snprintf(f, sizeof f, "%s.name", p);
    if (check_object(a, p, script_argument_spec, N_SPEC(script_argument_spec), e) != 0 ||
        check_id(json_object_get(a, "name"), f, e) != 0) {
        return -1;
    }
    const char *name = json_string_value(json_object_get(a, "name"));
    if (argument_role(t, name) == NULL) {
        return fail(e, f, "the tool declares no argument \"%s\"", name);
    }
    snprintf(f, sizeof f, "%s.value", p);
    if (check_plain(json_object_get(a, "value"), f, 4096, e) != 0) {
        return -1;
    }
    const json_t *task = json_object_get(a, "from_task"),
                 *quote = json_object_get(a, "quoted_from");
    snprintf(f, sizeof f, "%s.from_task", p);
    if (task != NULL && !json_is_true(task)) {
        return fail(e, f, "must be true (leave it out for a value the model wrote)");
    }
    if (task != NULL && quote != NULL) {
        return fail(e, p, "has both from_task and quoted_from: a value comes from one place");
    }
    snprintf(f, sizeof f, "%s.quoted_from", p);
    if (quote != NULL && (check_id(quote, f, e) != 0)) {
        return -1;
    }
    if (quote != NULL && !script_source(s, json_string_value(quote))) {
        return fail(e, f, "\"%s\" is neither read nor observed by the step",
                    json_string_value(quote));
    }
    /* A value the model wrote names the step's output as its lineage, which must hold it. */
    const char *content =
        json_string_value(json_object_get(json_object_get(s, "script"), "content"));
    snprintf(f, sizeof f, "%s.value", p);
    if (task == NULL && quote == NULL && content != NULL &&
        !token_holds(content, json_string_value(json_object_get(a, "value")))) {
        return fail(e, f,
                    "the script's content (the model's output, this value's lineage) does not "
                    "hold it as a token: write it into the content, or name its origin");
    }
    return 0;
}

/* One invocation of a step's script (at p): a live tool of the step's, its arguments. */
static int check_script_invocation(const json_t *doc, const json_t *s, const json_t *inv,
                                   const char *p, werr *e)
{
    char f[320];
    if (check_object(inv, p, script_invoke_spec, N_SPEC(script_invoke_spec), e) != 0) {
        return -1;
    }
    snprintf(f, sizeof f, "%s.tool", p);
    const char *tool = json_string_value(json_object_get(inv, "tool"));
    const json_t *t = json_object_get(json_object_get(doc, "tools"), tool);
    if (json_object_get(t, "arguments") == NULL) {
        return fail(e, f, "\"%.64s\" is not a tool with arguments", tool);
    }
    if (!list_has(json_object_get(s, "tools"), tool)) {
        return fail(e, f, "\"%.64s\" is not in the step's tools", tool);
    }
    const json_t *args = json_object_get(inv, "arguments");
    snprintf(f, sizeof f, "%s.arguments", p);
    if (check_count(args, f, WORKFLOW_MAX_ARGUMENTS, e) != 0) {
        return -1;
    }
    for (size_t k = 0; k < json_array_size(args); k++) {
        char q[352];
        snprintf(q, sizeof q, "%s[%zu]", f, k);
        if (check_script_argument(s, t, json_array_get(args, k), q, e) != 0) {
            return -1;
        }
    }
    return 0;
}

/* The observations and invocations of step i's script. */
static int check_script_live(const json_t *doc, const wdef *d, size_t i, werr *e)
{
    const json_t *s = json_array_get(d->steps, i);
    const json_t *script = json_object_get(s, "script");
    const json_t *observe = json_object_get(script, "observe");
    const json_t *invoke = json_object_get(script, "invoke");
    char p[96];
    snprintf(p, sizeof p, "steps[%zu].script.observe", i);
    if (check_count(observe, p, WORKFLOW_MAX_RESOURCES, e) != 0) {
        return -1;
    }
    for (size_t k = 0; k < json_array_size(observe); k++) {
        snprintf(p, sizeof p, "steps[%zu].script.observe[%zu]", i, k);
        if (check_script_observation(d, s, k, p, e) != 0) {
            return -1;
        }
    }
    snprintf(p, sizeof p, "steps[%zu].script.invoke", i);
    if (check_count(invoke, p, WORKFLOW_MAX_TOOLS, e) != 0) {
        return -1;
    }
    for (size_t k = 0; k < json_array_size(invoke); k++) {
        snprintf(p, sizeof p, "steps[%zu].script.invoke[%zu]", i, k);
        if (check_script_invocation(doc, s, json_array_get(invoke, k), p, e) != 0) {
            return -1;
        }
    }
    return 0;
}

static int check_scripts(const json_t *doc, const wdef *d, werr *e)
{
    bool bad = false;
    for (size_t i = 0; i < json_array_size(d->steps); i++) {
        if (part_ends(check_script_live(doc, d, i, e), &bad, e)) {
            return -1;
        }
    }
    return bad ? -1 : 0;
}

/* A part left unchecked: names the parts (with those after them) in e and fails. */
static int leave_unchecked(werr *e, const char *parts)
{
    e->unchecked = parts;
    return -1;
}

/* Resources, recipients and actors stand alone; grants refer to all three, steps to grants,
 * tools and expectations to steps. When every problem is collected, a part is checked only when
 * the parts it refers to hold: its references could only be judged against entries that are
 * wrong. Otherwise the first problem ends the check, in this same order. */
static int check_definition(const json_t *doc, wdef *d, werr *e)
{
    if (check_object(doc, "", top_spec, N_SPEC(top_spec), e) != 0) {
        return -1;
    }
    bool bad = false, base_bad = false;
    if (part_ends(check_id(json_object_get(doc, "name"), "name", e), &bad, e) ||
        part_ends(
            check_text(json_object_get(doc, "task"), "task", WORKFLOW_MAX_TEXT_BYTES, true, e),
            &bad, e)) {
        return -1;
    }
    d->resources = json_object_get(doc, "resources");
    d->recipients = json_object_get(doc, "recipients");
    d->actors = json_object_get(doc, "actors");
    d->grants = json_object_get(doc, "grants");
    d->steps = json_object_get(doc, "steps");
    d->servers = json_object_get(doc, "servers");
    if (part_ends(check_resources(d, e), &base_bad, e) ||
        part_ends(check_servers(d, e), &base_bad, e) ||
        part_ends(check_recipients(d, e), &base_bad, e) ||
        part_ends(check_actors(d, e), &base_bad, e)) {
        return -1;
    }
    if (base_bad) {
        return leave_unchecked(e, "grants, steps, tools, expect");
    }
    if (check_grants(d, e) != 0) {
        return leave_unchecked(e, "steps, tools, expect");
    }
    if (check_steps(d, e) != 0) {
        return leave_unchecked(e, "tools, expect");
    }
    if (part_ends(check_approvals(doc, d, e), &bad, e) ||
        part_ends(check_scripts(doc, d, e), &bad, e) ||
        part_ends(check_expect(doc, d, e), &bad, e)) {
        return -1;
    }
    return bad ? -1 : 0;
}

/* ---- building the workflow --------------------------------------------------------------- */

static void strs_free(guard_strs *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->items[i]);
    }
    free(s->items);
    s->items = NULL;
    s->n = 0;
}

/* Copies a validated list of strings. Returns 0, -1 on allocation failure (s left empty). */
static int strs_from_list(const json_t *list, guard_strs *s)
{
    s->items = NULL;
    s->n = 0;
    size_t n = json_array_size(list);
    if (n == 0) {
        return 0;
    }
    s->items = calloc(n, sizeof *s->items);
    if (s->items == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        s->items[i] = strdup(json_string_value(json_array_get(list, i)));
        if (s->items[i] == NULL) {
            s->n = i;
            strs_free(s);
            return -1;
        }
    }
    s->n = n;
    return 0;
}

static char *dup_field(const json_t *obj, const char *key)
{
    return strdup(json_string_value(json_object_get(obj, key)));
}

static void step_free(workflow_step *st)
{
    free(st->cap.step);
    free(st->cap.actor);
    free(st->cap.grant);
    strs_free(&st->cap.tools);
    strs_free(&st->cap.recipients);
    strs_free(&st->cap.resources);
    strs_free(&st->reads);
    strs_free(&st->receives);
    free(st->output_title);
    free(st->deliver_tool);
    free(st->deliver_recipient);
    free(st->public_template);
}

/* Fills st from the validated step s. Returns 0, -1 on allocation failure (st then holds only
 * what step_free releases). */
static int step_build(const json_t *s, workflow_step *st)
{
    memset(st, 0, sizeof *st);
    st->cap.step = dup_field(s, "name");
    st->cap.actor = dup_field(s, "actor");
    st->cap.grant = dup_field(s, "grant");
    st->output_title = dup_field(s, "output_title");
    if (st->cap.step == NULL || st->cap.actor == NULL || st->cap.grant == NULL ||
        st->output_title == NULL) {
        return -1;
    }
    if (strs_from_list(json_object_get(s, "tools"), &st->cap.tools) != 0 ||
        strs_from_list(json_object_get(s, "recipients"), &st->cap.recipients) != 0 ||
        strs_from_list(json_object_get(s, "resources"), &st->cap.resources) != 0 ||
        strs_from_list(json_object_get(s, "reads"), &st->reads) != 0 ||
        strs_from_list(json_object_get(s, "receives"), &st->receives) != 0) {
        return -1;
    }
    const json_t *deliver = json_object_get(s, "deliver");
    if (deliver != NULL) {
        st->deliver_tool = dup_field(deliver, "tool");
        st->deliver_recipient = dup_field(deliver, "recipient");
        if (st->deliver_tool == NULL || st->deliver_recipient == NULL) {
            return -1;
        }
    }
    st->public_fields = json_object_get(s, "public_fields");
    if (json_object_get(s, "public_template") != NULL) {
        st->public_template = dup_field(s, "public_template");
        if (st->public_template == NULL) {
            return -1;
        }
    }
    st->script = json_object_get(s, "script");
    st->recovery = json_is_true(json_object_get(s, "recovery"));
    return 0;
}

void workflow_free(workflow *wf)
{
    if (wf == NULL) {
        return;
    }
    for (size_t i = 0; i < wf->n_steps; i++) {
        step_free(&wf->steps[i]);
    }
    free(wf->steps);
    free(wf->name);
    free(wf->task);
    free(wf->definition);
    json_decref(wf->doc);
    free(wf);
}

static int sha256_hex(const char *buf, size_t len, char hex[65])
{
    return digest_sha256_hex(buf, len, hex);
}

/* The definition of len bytes at buf parsed and checked: the document (new reference), or NULL
 * after fail() reported why. */
static json_t *parse_and_check(const char *buf, size_t len, wdef *d, werr *e)
{
    if (len > WORKFLOW_MAX_FILE_BYTES) {
        fail(e, "definition", "%zu bytes, at most %d (limit)", len, WORKFLOW_MAX_FILE_BYTES);
        return NULL;
    }
    json_error_t jerr;
    json_t *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (doc == NULL) {
        fail(e, "definition", "not valid JSON at line %d column %d: %s", jerr.line, jerr.column,
             jerr.text);
        return NULL;
    }
    memset(d, 0, sizeof *d);
    if (check_definition(doc, d, e) != 0) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

size_t workflow_check_buffer(const char *buf, size_t len, workflow_problem_fn each, void *arg,
                             char *unchecked, size_t n)
{
    werr e = {NULL, 0, each, arg, 0, NULL};
    wdef d;
    if (unchecked != NULL && n > 0) {
        unchecked[0] = '\0';
    }
    if (buf == NULL) {
        fail(&e, "definition", "no bytes given");
        return e.count;
    }
    json_decref(parse_and_check(buf, len, &d, &e));
    if (e.unchecked != NULL && unchecked != NULL && n > 0) {
        snprintf(unchecked, n, "%s", e.unchecked);
    }
    return e.count;
}

int workflow_load_buffer(const char *buf, size_t len, workflow **out, char *err, size_t errlen)
{
    werr e = {err, errlen, NULL, NULL, 0, NULL};
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (out == NULL) {
        return fail(&e, "definition", "no place for the result");
    }
    *out = NULL;
    if (buf == NULL) {
        return fail(&e, "definition", "no bytes given");
    }
    wdef d;
    json_t *doc = parse_and_check(buf, len, &d, &e);
    if (doc == NULL) {
        return -1;
    }
    workflow *wf = calloc(1, sizeof *wf);
    if (wf == NULL) {
        json_decref(doc);
        return fail(&e, "definition", "out of memory");
    }
    wf->doc = doc;
    if (sha256_hex(buf, len, wf->version) != 0) {
        workflow_free(wf);
        return fail(&e, "definition", "SHA-256 of the definition failed");
    }
    wf->name = dup_field(doc, "name");
    wf->task = dup_field(doc, "task");
    wf->definition = malloc(len + 1);
    if (wf->definition != NULL) {
        memcpy(wf->definition, buf, len);
        wf->definition[len] = '\0';
        wf->definition_len = len;
    }
    size_t n = json_array_size(d.steps);
    if (n > 0) {
        wf->steps = calloc(n, sizeof *wf->steps);
    }
    if (wf->name == NULL || wf->task == NULL || wf->definition == NULL ||
        (n > 0 && wf->steps == NULL)) {
        workflow_free(wf);
        return fail(&e, "definition", "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        wf->n_steps = i + 1;
        if (step_build(json_array_get(d.steps, i), &wf->steps[i]) != 0) {
            workflow_free(wf);
            return fail(&e, "definition", "out of memory");
        }
    }
    *out = wf;
    return 0;
}

int workflow_load_file(const char *path, workflow **out, char *err, size_t errlen)
{
    werr e = {err, errlen, NULL, NULL, 0, NULL};
    if (out != NULL) {
        *out = NULL;
    }
    if (path == NULL) {
        return fail(&e, "definition", "no path given");
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return fail(&e, path, "cannot open: %s", strerror(errno));
    }
    size_t cap = WORKFLOW_MAX_FILE_BYTES + 1;
    char *buf = malloc(cap);
    if (buf == NULL) {
        fclose(f);
        return fail(&e, path, "out of memory");
    }
    size_t len = fread(buf, 1, cap, f);
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) {
        free(buf);
        return fail(&e, path, "read error");
    }
    int rc = workflow_load_buffer(buf, len, out, err, errlen);
    free(buf);
    return rc;
}

const workflow_step *workflow_step_find(const workflow *wf, const char *name)
{
    if (wf == NULL || name == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < wf->n_steps; i++) {
        if (strcmp(wf->steps[i].cap.step, name) == 0) {
            return &wf->steps[i];
        }
    }
    return NULL;
}

int workflow_approval_for(const workflow *wf, const char *tool, const char *recipient,
                          const char **by, long long *within_ms)
{
    *by = NULL;
    *within_ms = 0;
    if (wf == NULL || wf->doc == NULL || tool == NULL || recipient == NULL) {
        return 0;
    }
    const json_t *recipients = json_object_get(wf->doc, "recipients");
    const json_t *both[2] = {approval_of(wf->doc, recipients, tool, NULL),
                             approval_of(wf->doc, recipients, NULL, recipient)};
    for (int i = 0; i < 2; i++) {
        if (both[i] == NULL) {
            continue;
        }
        long long ms = (long long)json_integer_value(json_object_get(both[i], "within_ms"));
        if (*by == NULL || ms < *within_ms) {
            *within_ms = ms;
        }
        *by = json_string_value(json_object_get(both[i], "by"));
    }
    return *by != NULL;
}

int workflow_observed(const workflow *wf, const char *resource_id, long long *max_bytes,
                      const char **content_type)
{
    const json_t *res =
        wf != NULL && wf->doc != NULL ? json_object_get(wf->doc, "resources") : NULL;
    long ri = res != NULL && resource_id != NULL ? find_entry(res, "id", resource_id) : -1;
    const json_t *o = ri < 0 ? NULL : json_object_get(json_array_get(res, (size_t)ri), "observed");
    if (o == NULL) {
        return 0;
    }
    *max_bytes = (long long)json_integer_value(json_object_get(o, "max_bytes"));
    *content_type = json_string_value(json_object_get(o, "content_type"));
    return 1;
}

const json_t *workflow_live_tool(const workflow *wf, const char *tool)
{
    if (wf == NULL || wf->doc == NULL || tool == NULL) {
        return NULL;
    }
    const json_t *t = json_object_get(json_object_get(wf->doc, "tools"), tool);
    return json_object_get(t, "arguments") != NULL ? t : NULL;
}

const char *workflow_argument_role(const json_t *tool, const char *name)
{
    return tool != NULL && name != NULL ? argument_role(tool, name) : NULL;
}

int workflow_tool_clearance(const json_t *tool)
{
    const char *name = json_string_value(json_object_get(tool, "clearance"));
    return name != NULL ? name_index(conf_names, name) : 0;
}

bool workflow_one_line(const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; p != NULL && *p != '\0'; p++) {
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)) {
            return false;
        }
    }
    return true;
}

/* True when value could be one address: no whitespace, no control character and none of
 * ,;<>" (which separate or quote addresses in a list). */
static bool one_address(const char *value)
{
    for (const unsigned char *c = (const unsigned char *)value; *c != '\0'; c++) {
        if (*c <= ' ' || *c == 0x7f || strchr(",;<>\"", *c) != NULL) {
            return false;
        }
        /* C1 controls and NO-BREAK SPACE (C2 80..C2 A0), the spaces and separators
         * U+2000..U+200B and U+2028..U+2029 (E2 80 80..8B, A8, A9). */
        if ((c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0xa0) ||
            (c[0] == 0xe2 && c[1] == 0x80 && (c[2] <= 0x8b || c[2] == 0xa8 || c[2] == 0xa9))) {
            return false;
        }
    }
    return true;
}

/* True when value is one m stands for (m a validated "match"). A suffix or values class
 * stands for one address each: a value that could be a list of them matches neither. */
static bool match_holds(const json_t *m, const char *value)
{
    if (json_object_get(m, "pattern") == NULL && !one_address(value)) {
        return false;
    }
    const json_t *values = json_object_get(m, "values");
    for (size_t k = 0; k < json_array_size(values); k++) {
        if (strcmp(json_string_value(json_array_get(values, k)), value) == 0) {
            return true;
        }
    }
    const char *sfx = json_string_value(json_object_get(m, "suffix"));
    size_t n = strlen(value), ns = sfx != NULL ? strlen(sfx) : 0;
    if (sfx != NULL) {
        return n >= ns && strcmp(value + n - ns, sfx) == 0;
    }
    const char *pattern = json_string_value(json_object_get(m, "pattern"));
    regex_t re;
    if (pattern == NULL || pattern_compile(pattern, &re) != 0) {
        return false;
    }
    bool hit = regexec(&re, value, 0, NULL, 0) == 0;
    regfree(&re);
    return hit;
}

const char *workflow_match_destination(const workflow *wf, const char *value, int *clearance)
{
    const json_t *recipients =
        wf != NULL && wf->doc != NULL ? json_object_get(wf->doc, "recipients") : NULL;
    for (size_t i = 0; value != NULL && i < json_array_size(recipients); i++) {
        const json_t *r = json_array_get(recipients, i);
        const json_t *m = json_object_get(r, "match");
        if (m != NULL && match_holds(m, value)) {
            *clearance = name_index(conf_names, json_string_value(json_object_get(r, "clearance")));
            return json_string_value(json_object_get(r, "id"));
        }
    }
    return NULL;
}

const workflow_step *workflow_recovery_step(const workflow *wf)
{
    const workflow_step *found = NULL;
    if (wf == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < wf->n_steps; i++) {
        if (wf->steps[i].recovery) {
            found = &wf->steps[i];
        }
    }
    return found;
}

/* ---- seeding ----------------------------------------------------------------------------- */

/* Sets obj[key] = v, taking v (NULL counts as failure). Returns 0 or -1. */
static int put(json_t *obj, const char *key, json_t *v)
{
    return v == NULL ? -1 : json_object_set_new(obj, key, v);
}

static int put_copy(json_t *obj, const json_t *from, const char *key)
{
    return put(obj, key, json_deep_copy(json_object_get(from, key)));
}

static int put_label(json_t *obj, const char *key, const json_t *from, const char *field,
                     const char *const *names)
{
    int level = name_index(names, json_string_value(json_object_get(from, field)));
    return level < 0 ? -1 : put(obj, key, json_integer(level));
}

static int put_time(json_t *obj, const json_t *from, const char *key)
{
    long long t;
    if (parse_time(json_string_value(json_object_get(from, key)), &t) != 0) {
        return -1;
    }
    return put(obj, key, json_integer((json_int_t)t));
}

/* Appends a new object built by fill from src to arr. Returns 0 or -1. */
static int append_built(json_t *arr, const json_t *src, int (*fill)(json_t *, const json_t *))
{
    json_t *o = json_object();
    if (o == NULL) {
        return -1;
    }
    if (fill(o, src) != 0) {
        json_decref(o);
        return -1;
    }
    return json_array_append_new(arr, o);
}

static int fill_resource(json_t *o, const json_t *r)
{
    if (put_copy(o, r, "id") != 0 || put_copy(o, r, "title") != 0 ||
        put_label(o, "conf", r, "confidentiality", conf_names) != 0 ||
        put_label(o, "integrity", r, "integrity", integrity_names) != 0 ||
        (json_object_get(r, "content") != NULL ? put_copy(o, r, "content")
                                               : put(o, "content", json_string(""))) != 0) {
        return -1;
    }
    return 0;
}

static int fill_recipient(json_t *o, const json_t *r)
{
    if (put_copy(o, r, "id") != 0 || put_label(o, "clearance", r, "clearance", conf_names) != 0) {
        return -1;
    }
    return 0;
}

static int fill_actor(json_t *o, const json_t *a)
{
    if (put_copy(o, a, "id") != 0 || put_copy(o, a, "kind") != 0) {
        return -1;
    }
    return 0;
}

static int fill_grant(json_t *o, const json_t *g)
{
    bool root = json_object_get(g, "delegated_from") == NULL;
    if (put_copy(o, g, "id") != 0 || put(o, "root", json_boolean(root)) != 0 ||
        put_copy(o, g, "grantee") != 0 || put_copy(o, g, root ? "issuer" : "delegated_from") != 0 ||
        put_copy(o, g, "tools") != 0 || put_copy(o, g, "recipients") != 0 ||
        put_copy(o, g, "resources") != 0 || put_time(o, g, "valid_from") != 0 ||
        put_time(o, g, "valid_to") != 0) {
        return -1;
    }
    return 0;
}

int workflow_budget_ceilings(const workflow *wf, long long ceiling[WORKFLOW_N_BUDGETS],
                             const char *grant[WORKFLOW_N_BUDGETS])
{
    for (size_t k = 0; k < WORKFLOW_N_BUDGETS; k++) {
        ceiling[k] = 0;
        grant[k] = NULL;
    }
    const json_t *grants = json_object_get(wf->doc, "grants");
    for (size_t s = 0; s < wf->n_steps; s++) {
        const char *id = wf->steps[s].cap.grant;
        /* Validation refused cycles, so every walk ends at a root; the bound is a guard. */
        for (size_t hops = 0; id != NULL && hops <= WORKFLOW_MAX_GRANTS; hops++) {
            long at = find_entry(grants, "id", id);
            if (at < 0) {
                return -1;
            }
            const json_t *g = json_array_get(grants, (size_t)at);
            for (size_t k = 0; k < WORKFLOW_N_BUDGETS; k++) {
                const json_t *v = json_object_get(json_object_get(g, "budget"), budget_names[k]);
                if (v != NULL && (ceiling[k] == 0 || json_integer_value(v) < ceiling[k])) {
                    ceiling[k] = json_integer_value(v);
                    grant[k] = json_string_value(json_object_get(g, "id"));
                }
            }
            id = json_string_value(json_object_get(g, "delegated_from"));
        }
    }
    return 0;
}

const char *workflow_budget_name(size_t k)
{
    return k < WORKFLOW_N_BUDGETS ? budget_names[k] : NULL;
}

json_t *workflow_seed_json(const workflow *wf)
{
    if (wf == NULL || wf->doc == NULL) {
        return NULL;
    }
    static const char *const parts[] = {"resources", "recipients", "actors", "grants"};
    int (*const fills[])(json_t *, const json_t *) = {fill_resource, fill_recipient, fill_actor,
                                                      fill_grant};
    json_t *seed = json_object();
    if (seed == NULL) {
        return NULL;
    }
    for (size_t k = 0; k < 4; k++) {
        json_t *arr = json_array();
        if (put(seed, parts[k], arr) != 0) {
            json_decref(seed);
            return NULL;
        }
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(wf->doc, parts[k]), i, v)
        {
            if (append_built(arr, v, fills[k]) != 0) {
                json_decref(seed);
                return NULL;
            }
        }
    }
    return seed;
}

/* ---- public rendering -------------------------------------------------------------------- */

int workflow_render_public(const workflow_step *step, const json_t *fields, char **out, char *err,
                           size_t errlen)
{
    werr e = {err, errlen, NULL, NULL, 0, NULL};
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (out == NULL) {
        return fail(&e, "public", "no place for the result");
    }
    *out = NULL;
    if (step == NULL || step->public_fields == NULL || step->public_template == NULL) {
        return fail(&e, "public", "step %s has no public rendering",
                    step != NULL && step->cap.step != NULL ? step->cap.step : "(none)");
    }
    const char *sname = step->cap.step;
    if (!json_is_object(fields)) {
        return fail(&e, "fields", "the model gave no fields object for step %s", sname);
    }
    /* Field names and values come from the model: they are never echoed into the reason, so a
     * refused value cannot carry text out through an error. */
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)fields, key, v)
    {
        if (json_object_get(step->public_fields, key) == NULL) {
            return fail(&e, "fields", "a field the step %s does not declare was given", sname);
        }
    }
    const json_t *allowed;
    json_object_foreach(step->public_fields, key, allowed)
    {
        v = json_object_get(fields, key);
        if (v == NULL) {
            return fail(&e, "fields", "declared field %s is missing", key);
        }
        if (!json_is_string(v)) {
            return fail(&e, "fields", "field %s is not a string", key);
        }
        bool ok = false;
        size_t k;
        json_t *a;
        json_array_foreach(allowed, k, a)
        {
            ok = ok || json_equal(a, v);
        }
        if (!ok) {
            return fail(&e, "fields", "the value of field %s is not one of its allowed values",
                        key);
        }
    }
    /* Two passes over the template: the first measures, the second writes. The result holds
     * only template text and allowed values. */
    const char *t = step->public_template;
    char *buf = NULL;
    size_t size = 0;
    for (int pass = 0; pass < 2; pass++) {
        size_t used = 0, pos = 0, start = 0, end = 0, len = 0, lit = 0;
        const char *name = NULL;
        int r;
        while ((r = next_placeholder(t, &pos, &start, &end, &name, &len)) == 1) {
            const json_t *val = field_named(step->public_fields, name, len) != NULL
                                    ? field_named(fields, name, len)
                                    : NULL;
            if (val == NULL) {
                free(buf);
                return fail(&e, "public_template",
                            "placeholder {%.*s} of step %s is not a declared field", (int)len, name,
                            sname);
            }
            size_t vlen = json_string_length(val);
            if (buf != NULL) {
                memcpy(buf + used, t + lit, start - lit);
                memcpy(buf + used + (start - lit), json_string_value(val), vlen);
            }
            used += (start - lit) + vlen;
            lit = end;
        }
        if (r < 0) {
            free(buf);
            return fail(&e, "public_template", "malformed template of step %s", sname);
        }
        if (buf != NULL) {
            memcpy(buf + used, t + lit, pos - lit);
            buf[used + (pos - lit)] = '\0';
            break;
        }
        size = used + (pos - lit) + 1;
        buf = malloc(size);
        if (buf == NULL) {
            return fail(&e, "public", "out of memory");
        }
    }
    *out = buf;
    return 0;
}
