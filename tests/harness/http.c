/*
 * http.c - charterd's HTTP/JSON surface as any caller sees it: the curl program posting a
 * Connect unary call with the headers a suite chooses, for suites that check a behaviour over
 * NNG and HTTP alike. (test_http.c, the HTTP surface's own suite, keeps its own runner.)
 */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int harness_http_post(const char *hostport, const char *path, const char *const *headers,
                      size_t n_headers, const char *body, harness_http_reply *out)
{
    memset(out, 0, sizeof *out);
    char url[256];
    if (snprintf(url, sizeof url, "http://%s%s", hostport, path) >= (int)sizeof url ||
        n_headers > 8)
        return -1;
    const char *argv[40];
    size_t n = 0;
    argv[n++] = "curl";
    argv[n++] = "-sS";
    argv[n++] = "--max-time";
    argv[n++] = "30";
    argv[n++] = "-w";
    argv[n++] = "\n%{http_code}";
    argv[n++] = "-X";
    argv[n++] = "POST";
    argv[n++] = "-H";
    argv[n++] = "Content-Type: application/json";
    for (size_t i = 0; i < n_headers; i++) {
        argv[n++] = "-H";
        argv[n++] = headers[i];
    }
    argv[n++] = "--data-binary";
    argv[n++] = body != NULL ? body : "{}";
    argv[n++] = url;
    argv[n] = NULL;
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execvp("curl", (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    char buf[sizeof out->body + 16];
    size_t got = 0;
    ssize_t k;
    while (got < sizeof buf - 1 && (k = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)k;
    close(fds[0]);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    buf[got] = '\0';
    char *nl = strrchr(buf, '\n');
    if (nl == NULL)
        return -1;
    *nl = '\0';
    out->status = atoi(nl + 1);
    size_t blen = strlen(buf) < sizeof out->body - 1 ? strlen(buf) : sizeof out->body - 1;
    memcpy(out->body, buf, blen);
    out->body[blen] = '\0';
    return 0;
}
