/*
 * mcp_downstream_http.c - charter-mcp as the MCP client of a downstream server spoken to over
 * Streamable HTTP (a "servers" entry with a url), with libcurl: each JSON-RPC message is one
 * POST, answered with JSON or with an event stream read as far as the response; the session id
 * the server issues at initialize and the revision it agreed on go with every later request,
 * and the session ends with DELETE.
 *
 * The bearer token comes from charter-mcp's own environment or a file the workflow names,
 * never from the workflow itself or from the agent, and is sent to that url only: redirects
 * are not followed. An answer is bounded like a child's (MCP_DOWNSTREAM_MAX_MESSAGE, the
 * server's timeout_ms), and whether a request reached the server is told apart from whether
 * it was answered, so a failed call is reported with the outcome it has.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mcp_downstream.h"

/* A credential file is read up to this size (bytes). */
#define CREDENTIAL_MAX 4096
/* Answering a request the server sent, and ending a session, take at most this long (ms). */
#define SIDE_TIMEOUT_MS 2000L

int ds_http_global_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

void ds_http_global_cleanup(void)
{
    curl_global_cleanup();
}

static void wipe_free(char *s)
{
    if (s)
        explicit_bzero(s, strlen(s));
    free(s);
}

int ds_http_peer_of(const mcp_downstream *d, long long deadline, ds_http_peer *p)
{
    memset(p, 0, sizeof *p);
    p->name = d->name;
    p->deadline = deadline;
    snprintf(p->protocol, sizeof p->protocol, "%s", d->protocol);
    p->url = strdup(json_string_value(json_object_get(d->decl, "url")));
    p->auth = d->auth ? strdup(d->auth) : NULL;
    p->session_id = d->session_id ? strdup(d->session_id) : NULL;
    if (!p->url || (d->auth && !p->auth) || (d->session_id && !p->session_id)) {
        ds_http_peer_free(p);
        return -1;
    }
    return 0;
}

void ds_http_peer_free(ds_http_peer *p)
{
    free(p->url);
    wipe_free(p->auth);
    free(p->session_id);
    memset(p, 0, sizeof *p);
}

/* ---- the credential ------------------------------------------------------------------------ */

/* Whether a token can be sent as a bearer credential: visible ASCII, no space, nothing that
 * could end the header line. */
static bool token_ok(const char *t, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)t[i] < 0x21 || (unsigned char)t[i] > 0x7e)
            return false;
    return len > 0;
}

/* The token in file path (malloc'd, trailing line end and blanks dropped), or NULL with err. */
static char *read_token_file(const char *server, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return snprintf(err, errlen, "server %s: cannot read its credential_file %.200s: %s",
                        server, path, strerror(errno)),
               NULL;
    char *buf = calloc(1, CREDENTIAL_MAX + 2);
    size_t n = buf ? fread(buf, 1, CREDENTIAL_MAX + 1, f) : 0;
    bool bad = !buf || ferror(f) || n > CREDENTIAL_MAX;
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "server %s: cannot read its credential_file %.200s%s", server, path,
                 buf ? " (at most 4096 bytes)" : ": out of memory");
        if (buf)
            explicit_bzero(buf, CREDENTIAL_MAX + 2);
        free(buf);
        return NULL;
    }
    while (n > 0 &&
           (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        buf[--n] = '\0';
    return buf;
}

int ds_http_credential(mcp_downstream *d, char *err, size_t errlen)
{
    const char *env = json_string_value(json_object_get(d->decl, "credential_env"));
    const char *file = json_string_value(json_object_get(d->decl, "credential_file"));
    wipe_free(d->auth);
    d->auth = NULL;
    if (!env && !file)
        return 0;
    char *token = NULL;
    if (env) {
        const char *v = getenv(env);
        if (!v || !*v)
            return snprintf(err, errlen,
                            "server %s: its credential_env %s is not set in charter-mcp's "
                            "environment",
                            d->name, env),
                   -1;
        token = strdup(v);
    } else if (!(token = read_token_file(d->name, file, err, errlen))) {
        return -1;
    }
    bool ok = token && token_ok(token, strlen(token));
    size_t len = token ? strlen(token) + sizeof "Authorization: Bearer " : 0;
    if (ok && (d->auth = malloc(len)) != NULL)
        snprintf(d->auth, len, "Authorization: Bearer %s", token);
    wipe_free(token);
    if (!ok)
        return snprintf(err, errlen,
                        "server %s: its credential (%s %.200s) is empty or holds a space, a "
                        "second line or a character outside printable ASCII",
                        d->name, env ? "credential_env" : "credential_file", env ? env : file),
               -1;
    return d->auth ? 0 : (snprintf(err, errlen, "out of memory"), -1);
}

/* ---- reading an answer --------------------------------------------------------------------- */

/* What one exchange has read so far. */
typedef struct {
    const ds_http_peer *peer;
    json_int_t want;     /* the id of the response awaited, or -1 */
    char ctype[128];     /* Content-Type of the answer */
    char *session_id;    /* Mcp-Session-Id of the answer (malloc'd) */
    bool bad_session_id; /* one that is not visible ASCII */
    char *body;          /* the JSON body, or the event stream not yet taken apart */
    size_t len, total;   /* bytes held; bytes received in all */
    size_t scanned;      /* bytes of the held stream already searched for an event's end */
    bool over, nomem;    /* past MCP_DOWNSTREAM_MAX_MESSAGE; out of memory */
    bool not_json;       /* an event whose data is no JSON-RPC message */
    bool skipped;        /* the body was not read: nothing was awaited */
    bool expired;        /* the peer's deadline passed while the answer was read */
    json_t *answer;      /* the response awaited, once it came */
} ds_reply;

static bool is_sse(const ds_reply *r)
{
    return strncasecmp(r->ctype, "text/event-stream", 17) == 0;
}

static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
    ds_reply *r = arg;
    size_t len = size * n, vl;
    const char *v = memchr(line, ':', len);
    if (!v)
        return len;
    size_t nl = (size_t)(v - line);
    for (v++, vl = len - nl - 1; vl > 0 && (*v == ' ' || *v == '\t'); v++, vl--)
        ;
    while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
        vl--;
    if (nl == 12 && strncasecmp(line, "Content-Type", 12) == 0 && vl < sizeof r->ctype) {
        memcpy(r->ctype, v, vl);
        r->ctype[vl] = '\0';
    } else if (nl == 14 && strncasecmp(line, "Mcp-Session-Id", 14) == 0 && !r->session_id) {
        /* The specification's session id: visible ASCII; anything else never goes back out. */
        r->bad_session_id = !token_ok(v, vl) || vl > 256;
        if (!r->bad_session_id && !(r->session_id = strndup(v, vl)))
            r->nomem = true;
    }
    return len;
}

/* A request the server sent within the stream: ping is answered with an empty result, and any
 * other with "method not found" (charter-mcp offers its servers no client capability), each
 * in a POST of its own while the stream stays open. The answer awaits nothing, so whatever
 * the server sends back to it is not read, and it is over by the call's deadline: a server
 * cannot nest answers within answers, nor stretch a call with requests. */
static void answer_server_request(const ds_http_peer *p, const json_t *msg)
{
    long long now = ds_now_ms();
    if (now >= p->deadline)
        return;
    bool ping = strcmp(json_string_value(json_object_get(msg, "method")), "ping") == 0;
    json_t *a = ping ? json_pack("{s:s, s:O, s:{}}", "jsonrpc", "2.0", "id",
                                 json_object_get(msg, "id"), "result")
                     : json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
                                 json_object_get(msg, "id"), "error", "code", MCP_METHOD_NOT_FOUND,
                                 "message",
                                 "charter-mcp offers its downstream servers no client "
                                 "capabilities");
    ds_http_peer side = *p;
    if (now + SIDE_TIMEOUT_MS < p->deadline)
        side.deadline = now + SIDE_TIMEOUT_MS;
    json_t *none = NULL;
    char *sid = NULL, err[64];
    bool sent;
    if (a)
        ds_http_exchange(&side, a, -1, &none, &sid, &sent, err, sizeof err);
    free(sid);
    json_decref(a);
}

/* One message the server sent: the response awaited is kept; a request is answered; anything
 * else (notifications, progress, responses to other ids) is dropped. */
static void take_message(ds_reply *r, json_t *msg)
{
    const json_t *id = json_object_get(msg, "id");
    if (json_is_string(json_object_get(msg, "method"))) {
        if (id && r->want >= 0)
            answer_server_request(r->peer, msg);
    } else if (r->want >= 0 && !r->answer && json_is_integer(id) &&
               json_integer_value(id) == r->want) {
        r->answer = json_incref(msg);
    }
}

/* The data of one event (its "data:" lines joined by newlines), taken as a message. */
static void take_event(ds_reply *r, char *ev, size_t len)
{
    char *data = malloc(len + 1);
    size_t dl = 0;
    if (!data) {
        r->nomem = true;
        return;
    }
    for (char *line = ev, *end; line < ev + len; line = end + 1) {
        end = memchr(line, '\n', (size_t)(ev + len - line));
        if (!end)
            end = ev + len;
        size_t ll = (size_t)(end - line);
        if (ll > 0 && line[ll - 1] == '\r')
            ll--;
        if (ll < 5 || strncmp(line, "data:", 5) != 0)
            continue; /* event, id, retry, comments */
        size_t skip = ll > 5 && line[5] == ' ' ? 6 : 5;
        if (dl > 0)
            data[dl++] = '\n';
        memcpy(data + dl, line + skip, ll - skip);
        dl += ll - skip;
    }
    json_t *msg = dl > 0 ? json_loadb(data, dl, JSON_REJECT_DUPLICATES, NULL) : NULL;
    if (dl > 0 && !json_is_object(msg))
        r->not_json = true;
    else if (msg)
        take_message(r, msg);
    json_decref(msg);
    free(data);
}

/* Takes every whole event out of the stream buffer (an event ends at a blank line). */
static void take_events(ds_reply *r)
{
    size_t start = 0;
    /* An end not found before may straddle the last chunk: search again from 3 bytes back. */
    for (size_t i = r->scanned > 3 ? r->scanned - 3 : 0; i + 1 < r->len && !r->answer; i++) {
        size_t blank = r->body[i] == '\n' && r->body[i + 1] == '\n'                ? 2
                       : i + 3 < r->len && memcmp(r->body + i, "\r\n\r\n", 4) == 0 ? 4
                                                                                   : 0;
        if (blank == 0)
            continue;
        take_event(r, r->body + start, i - start);
        i += blank - 1;
        start = i + 1;
    }
    memmove(r->body, r->body + start, r->len - start);
    r->len -= start;
    r->scanned = r->len;
}

static size_t on_body(char *chunk, size_t size, size_t n, void *arg)
{
    ds_reply *r = arg;
    size_t len = size * n;
    if (r->want < 0) {
        /* Nothing is awaited: the status says all, and a stream is not waited for. */
        r->skipped = true;
        return 0;
    }
    r->total += len;
    if (r->total > MCP_DOWNSTREAM_MAX_MESSAGE) {
        r->over = true;
        return 0;
    }
    if (!r->body && !(r->body = malloc(MCP_DOWNSTREAM_MAX_MESSAGE))) {
        r->nomem = true;
        return 0;
    }
    memcpy(r->body + r->len, chunk, len);
    r->len += len;
    if (is_sse(r))
        take_events(r);
    /* Answering the server's requests may have used up the time: the call ends at its deadline
     * whatever the server keeps sending. */
    if (!r->answer && ds_now_ms() >= r->peer->deadline)
        r->expired = true;
    /* Once the response is in, the rest of the stream is not waited for. */
    return r->answer || r->nomem || r->expired ? 0 : len;
}

/* ---- one exchange -------------------------------------------------------------------------- */

/* The request's header lines; NULL when out of memory. */
static struct curl_slist *request_headers(const ds_http_peer *p)
{
    char sid[300] = "", ver[64] = "";
    if (p->session_id)
        snprintf(sid, sizeof sid, "Mcp-Session-Id: %s", p->session_id);
    if (p->protocol[0])
        snprintf(ver, sizeof ver, "MCP-Protocol-Version: %s", p->protocol);
    const char *lines[] = {"Content-Type: application/json",
                           "Accept: application/json, text/event-stream",
                           "Expect:",
                           p->auth,
                           sid[0] ? sid : NULL,
                           ver[0] ? ver : NULL};
    struct curl_slist *h = NULL;
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
        struct curl_slist *next = lines[i] ? curl_slist_append(h, lines[i]) : h;
        if (!next) {
            curl_slist_free_all(h);
            return NULL;
        }
        h = next;
    }
    return h;
}

/* Sets up a transfer to p's url: method "POST" with body, or "DELETE". */
static CURLcode set_transfer(CURL *c, const ds_http_peer *p, const char *method, const char *body,
                             struct curl_slist *headers, ds_reply *r, char *curl_err)
{
    long long left = p->deadline - ds_now_ms();
    long timeout_ms = left < 1 ? 1L : (long)left;
    long connect_ms = timeout_ms < 10000 ? timeout_ms : 10000;
    char agent[64]; /* libcurl keeps its own copy */
    snprintf(agent, sizeof agent, "charter-mcp/%s", charter_version());
    CURLcode set = CURLE_OK;
#define SET(opt, val)                                                                              \
    do {                                                                                           \
        if (set == CURLE_OK)                                                                       \
            set = curl_easy_setopt(c, opt, val);                                                   \
    } while (0)
    SET(CURLOPT_URL, p->url);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_FOLLOWLOCATION, 0L); /* the credential goes to this url only */
    SET(CURLOPT_NOSIGNAL, 1L);       /* many threads: no SIGALRM-based DNS timeouts */
    SET(CURLOPT_TIMEOUT_MS, timeout_ms);
    SET(CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    SET(CURLOPT_HTTPHEADER, headers);
    SET(CURLOPT_USERAGENT, agent);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, r);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, r);
    SET(CURLOPT_ERRORBUFFER, curl_err);
    if (body) {
        SET(CURLOPT_POSTFIELDS, body);
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    } else {
        SET(CURLOPT_CUSTOMREQUEST, method);
    }
#undef SET
    return set;
}

/* What the body of an answer that is no answer (a refusal, an error status) is said to be: its
 * size only, the text itself going to stderr (the credential masked), never to err: it is the
 * server's text, which must not reach the agent around the gates. */
static const char *body_note(const ds_http_peer *p, const ds_reply *r, long status, char *buf,
                             size_t buflen)
{
    buf[0] = '\0';
    if (r->total == 0)
        return buf;
    char what[64];
    snprintf(what, sizeof what, "the body of its HTTP %ld", status);
    ds_log_server_text(p->name, what, r->body ? r->body : "", r->len, p->auth);
    snprintf(buf, buflen, ", with a %zu-byte body not shown", r->total);
    return buf;
}

/* What an HTTP status that is no answer says (a DS_* code, err set). */
static int status_failure(const ds_http_peer *p, const ds_reply *r, long status, char *err,
                          size_t errlen)
{
    char why[80];
    body_note(p, r, status, why, sizeof why);
    if (status == 401)
        return snprintf(err, errlen,
                        p->auth ? "server %s: the server refused the credential (HTTP 401%s)"
                                : "server %s: the server asks for a credential (HTTP 401%s): name "
                                  "its credential_env or credential_file in the workflow",
                        p->name, why),
               DS_HTTP_REFUSED;
    if (status == 404 && p->session_id)
        return snprintf(err, errlen,
                        "server %s: the server ended the session (HTTP 404): the next call opens "
                        "a new one",
                        p->name),
               DS_HTTP_REFUSED;
    if (status >= 400 && status < 500)
        return snprintf(err, errlen, "server %s: the server refused the request (HTTP %ld%s)",
                        p->name, status, why),
               DS_HTTP_REFUSED;
    if (status >= 300 && status < 400)
        return snprintf(err, errlen,
                        "server %s: the server answered with a redirect (HTTP %ld), which is not "
                        "followed",
                        p->name, status),
               DS_HTTP_FAILED;
    return snprintf(err, errlen, "server %s: the server answered HTTP %ld%s", p->name, status, why),
           DS_HTTP_FAILED;
}

void ds_log_server_text(const char *server, const char *what, const char *text, size_t len,
                        const char *auth)
{
    static const char bearer[] = "Authorization: Bearer ";
    const char *token =
        auth && strncmp(auth, bearer, sizeof bearer - 1) == 0 ? auth + sizeof bearer - 1 : NULL;
    size_t tl = token ? strlen(token) : 0, shown = len < 1024 ? len : 1024;
    char *line = malloc(shown + 1);
    size_t o = 0;
    for (size_t i = 0; line && i < shown; i++) {
        if (tl > 0 && i + tl <= len && memcmp(text + i, token, tl) == 0) {
            /* The mask is no longer than the token, so the line holds it. */
            for (size_t k = 0; k < 3 && o < shown; k++)
                line[o++] = '*';
            i += tl - 1;
            continue;
        }
        unsigned char c = (unsigned char)text[i];
        line[o++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (line)
        line[o] = '\0';
    fprintf(stderr, "charter-mcp: server %s: %s (not shown to the agent): %s%s\n", server, what,
            line ? line : "(out of memory)", len > shown ? " ..." : "");
    if (line)
        explicit_bzero(line, shown + 1);
    free(line);
}

/* The awaited response from a JSON body: the object itself, or one of a batch. */
static void take_json_body(ds_reply *r)
{
    json_t *j = r->body ? json_loadb(r->body, r->len, JSON_REJECT_DUPLICATES, NULL) : NULL;
    size_t n = json_is_array(j) ? json_array_size(j) : 1;
    r->not_json = !json_is_object(j) && !json_is_array(j);
    for (size_t i = 0; i < n && !r->not_json; i++) {
        json_t *m = json_is_array(j) ? json_array_get(j, i) : j;
        if (json_is_object(m))
            take_message(r, m);
    }
    json_decref(j);
}

/* After the transfer: 0 with r->answer (or none awaited), or the DS_* code with err. */
static int outcome(const ds_http_peer *p, ds_reply *r, CURLcode res, long status, bool sent,
                   const char *curl_err, char *err, size_t errlen)
{
    if (r->over)
        return snprintf(err, errlen, "server %s: the answer is larger than %s", p->name,
                        MCP_DOWNSTREAM_MAX_MESSAGE_TEXT),
               DS_TOO_LARGE;
    if (r->nomem)
        return snprintf(err, errlen, "server %s: out of memory reading the answer", p->name), DS_IO;
    if (r->answer)
        return 0;
    if (!sent)
        return snprintf(err, errlen, "server %s: cannot connect to the server: %.200s", p->name,
                        curl_err[0] ? curl_err : curl_easy_strerror(res)),
               DS_IO;
    if (r->expired || res == CURLE_OPERATION_TIMEDOUT)
        return snprintf(err, errlen, "server %s: no answer within the server's timeout_ms",
                        p->name),
               DS_TIMEOUT;
    if ((res != CURLE_OK && !r->skipped) || status == 0)
        return snprintf(err, errlen,
                        "server %s: the server closed the connection without "
                        "answering",
                        p->name),
               DS_EOF;
    if (status < 200 || status > 299)
        return status_failure(p, r, status, err, errlen);
    if (r->bad_session_id)
        return snprintf(err, errlen,
                        "server %s: the server issued an Mcp-Session-Id that is not visible ASCII",
                        p->name),
               DS_HTTP_FAILED;
    if (r->want < 0)
        return 0;
    if (!is_sse(r))
        take_json_body(r);
    if (r->answer)
        return 0;
    if (r->not_json)
        return snprintf(err, errlen,
                        "server %s: the server answered with something that is not "
                        "a JSON-RPC message",
                        p->name),
               DS_NOT_JSON;
    return snprintf(err, errlen,
                    "server %s: the server answered HTTP %ld without a response to "
                    "the request",
                    p->name, status),
           DS_HTTP_FAILED;
}

/* One transfer: POST of body (or method without one), its answer read into *r. */
static int transfer(const ds_http_peer *p, const char *method, const char *body, ds_reply *r,
                    bool *sent, char *err, size_t errlen)
{
    *sent = false;
    if (ds_now_ms() >= p->deadline)
        return snprintf(err, errlen, "server %s: no answer within the server's timeout_ms",
                        p->name),
               DS_TIMEOUT;
    CURL *c = curl_easy_init();
    struct curl_slist *headers = request_headers(p);
    char curl_err[CURL_ERROR_SIZE] = "";
    if (!c || !headers) {
        curl_slist_free_all(headers);
        curl_easy_cleanup(c);
        return snprintf(err, errlen, "out of memory (or libcurl could not start a transfer)"),
               DS_IO;
    }
    CURLcode res = set_transfer(c, p, method, body, headers, r, curl_err);
    if (res != CURLE_OK) {
        snprintf(err, errlen, "server %s: libcurl refused an option: %s", p->name,
                 curl_easy_strerror(res));
    } else {
        res = curl_easy_perform(c);
        long status = 0, req_size = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &req_size);
        *sent = req_size > 0;
        int rc = outcome(p, r, res, status, *sent, curl_err, err, errlen);
        curl_slist_free_all(headers);
        curl_easy_cleanup(c);
        return rc;
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    return DS_IO;
}

int ds_http_exchange(const ds_http_peer *p, const json_t *msg, json_int_t want, json_t **answer,
                     char **session_id, bool *sent, char *err, size_t errlen)
{
    *answer = NULL;
    *session_id = NULL;
    *sent = false;
    char *body = json_dumps(msg, JSON_COMPACT);
    if (!body)
        return snprintf(err, errlen, "out of memory"), DS_IO;
    ds_reply r;
    memset(&r, 0, sizeof r);
    r.peer = p;
    r.want = want;
    int rc = transfer(p, "POST", body, &r, sent, err, errlen);
    free(body);
    free(r.body);
    if (rc == 0) {
        *answer = r.answer;
        *session_id = r.session_id;
        return 0;
    }
    json_decref(r.answer);
    free(r.session_id);
    return rc;
}

void ds_http_delete(const ds_http_peer *p)
{
    if (!p->session_id)
        return;
    ds_http_peer side = *p;
    side.deadline = ds_now_ms() + SIDE_TIMEOUT_MS;
    ds_reply r;
    memset(&r, 0, sizeof r);
    r.peer = &side;
    r.want = -1;
    bool sent;
    char err[256];
    transfer(&side, "DELETE", NULL, &r, &sent, err, sizeof err);
    free(r.body);
    free(r.session_id);
}
