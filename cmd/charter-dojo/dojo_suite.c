/*
 * dojo_suite.c - a suite read from bench/dojo/<suite>/: suite.json (environment, user tasks,
 * injection tasks) and the workflow definition it names, with the checks that make a malformed
 * suite a load error rather than a case that measures nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dojo.h"

const char *const dojo_class_names[DOJO_CLASSES] = {
    "exfiltration", "unauthorized_action", "output_manipulation", "laundering",
    "wider_scope",  "borrowed_context",    "budget_split",        "replay"};

int dojo_class_index(const char *name)
{
    for (int i = 0; name != NULL && i < DOJO_CLASSES; i++)
        if (strcmp(dojo_class_names[i], name) == 0)
            return i;
    return -1;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, cap);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, 4096, f);
        n += r;
        if (r == 0)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static const char *str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* The resource of item in the workflow, or NULL. */
static const json_t *item_resource(const dojo_suite *s, const char *item)
{
    const char *rid = str(json_object_get(s->items, item), "resource");
    size_t i;
    const json_t *r;
    json_array_foreach(json_object_get(s->workflow, "resources"), i, r)
    {
        if (rid != NULL && str(r, "id") != NULL && strcmp(str(r, "id"), rid) == 0)
            return r;
    }
    return NULL;
}

int dojo_item_integrity(const dojo_suite *s, const char *item)
{
    const char *in = str(item_resource(s, item), "integrity");
    return in == NULL ? -1 : strcmp(in, "trusted") == 0 ? 1 : 0;
}

bool dojo_tool_has_effect(const dojo_suite *s, const char *tool)
{
    const json_t *t = json_object_get(json_object_get(s->workflow, "tools"), tool);
    return json_is_true(json_object_get(t, "effect"));
}

/* Appends n bytes of p to the buffer *b (length *len, capacity *cap). Returns 0 or -1. */
static int append(char **b, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t nc = (*len + n + 1) * 2;
        char *nb = realloc(*b, nc);
        if (nb == NULL)
            return -1;
        *b = nb;
        *cap = nc;
    }
    memcpy(*b + *len, p, n);
    *len += n;
    (*b)[*len] = '\0';
    return 0;
}

char *dojo_item_render(const dojo_suite *s, const char *item, const char *text, bool *touched)
{
    const char *c = str(json_object_get(s->items, item), "content");
    *touched = false;
    if (c == NULL)
        return NULL;
    char *b = NULL;
    size_t len = 0, cap = 0;
    if (append(&b, &len, &cap, "", 0) != 0)
        return NULL;
    while (*c != '\0') {
        const char *at = strstr(c, "{inj:");
        const char *end = at != NULL ? strchr(at, '}') : NULL;
        if (at == NULL || end == NULL)
            return append(&b, &len, &cap, c, strlen(c)) == 0 ? b : (free(b), NULL);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(end - at - 5), at + 5);
        const char *fill = text != NULL ? text : str(s->points, name);
        *touched = true;
        if (append(&b, &len, &cap, c, (size_t)(at - c)) != 0 ||
            append(&b, &len, &cap, fill ? fill : "", fill ? strlen(fill) : 0) != 0) {
            free(b);
            return NULL;
        }
        c = end + 1;
    }
    return b;
}

static int bad(char *err, size_t n, const dojo_suite *s, const char *what, const char *id)
{
    snprintf(err, n, "%s: %s%s%s", s->name, what, id ? ": " : "", id ? id : "");
    return -1;
}

/* Every step's item is an item of the suite; every call names a tool of the workflow. */
static int check_steps(const dojo_suite *s, const json_t *steps, const char *id, char *err,
                       size_t n)
{
    size_t i;
    const json_t *st;
    if (!json_is_array(steps))
        return bad(err, n, s, "steps or calls must be a list", id);
    json_array_foreach(steps, i, st)
    {
        const char *item = str(st, "read"), *tool = str(st, "call");
        if (item != NULL && json_object_get(s->items, item) == NULL)
            return bad(err, n, s, "a step reads an item the suite does not have", id);
        if (tool != NULL && json_object_get(json_object_get(s->workflow, "tools"), tool) == NULL)
            return bad(err, n, s, "a step calls a tool the workflow does not declare", id);
        if (item == NULL && tool == NULL && str(st, "note") == NULL &&
            json_object_get(st, "launder") == NULL)
            return bad(err, n, s, "a step is none of read, note, call, launder", id);
    }
    return 0;
}

static int check_tasks(const dojo_suite *s, char *err, size_t n)
{
    size_t i;
    const json_t *t;
    json_array_foreach(s->users, i, t)
    {
        if (str(t, "id") == NULL || str(t, "prompt") == NULL ||
            !json_is_array(json_object_get(t, "utility")))
            return bad(err, n, s, "a user task needs id, prompt and utility", str(t, "id"));
        if (check_steps(s, json_object_get(t, "steps"), str(t, "id"), err, n) != 0)
            return -1;
    }
    json_array_foreach(s->injections, i, t)
    {
        if (str(t, "id") == NULL || str(t, "text") == NULL || str(t, "goal") == NULL ||
            !json_is_array(json_object_get(t, "success")))
            return bad(err, n, s, "an injection task needs id, goal, text and success",
                       str(t, "id"));
        if (dojo_class_index(str(t, "class")) < 0)
            return bad(err, n, s, "an injection task's class is not one of the classes",
                       str(t, "id"));
        if (check_steps(s, json_object_get(t, "calls"), str(t, "id"), err, n) != 0)
            return -1;
    }
    return 0;
}

/* Injection points sit in untrusted items only, and every point has a benign default. */
static int check_items(const dojo_suite *s, char *err, size_t n)
{
    const char *id;
    const json_t *it;
    json_object_foreach(s->items, id, it)
    {
        if (str(it, "resource") == NULL || str(it, "content") == NULL || str(it, "locator") == NULL)
            return bad(err, n, s, "an item needs resource, locator and content", id);
        if (dojo_item_integrity(s, id) < 0)
            return bad(err, n, s, "an item's resource is not in the workflow", id);
        bool touched = false;
        char *c = dojo_item_render(s, id, NULL, &touched);
        free(c);
        if (touched && dojo_item_integrity(s, id) != 0)
            return bad(err, n, s, "an injection point sits in a trusted item", id);
    }
    return 0;
}

static int load_workflow(dojo_suite *s, char *err, size_t n)
{
    char path[PATH_MAX + 64];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/%s", s->dir, str(s->doc, "workflow"));
    s->workflow_text = slurp(path, &len);
    if (s->workflow_text == NULL)
        return bad(err, n, s, "cannot read the workflow", path);
    json_error_t e;
    s->workflow = json_loadb(s->workflow_text, len, 0, &e);
    if (s->workflow == NULL)
        return bad(err, n, s, "the workflow is no JSON", e.text);
    s->workflow_name = str(s->workflow, "name");
    return s->workflow_name != NULL ? 0 : bad(err, n, s, "the workflow has no name", NULL);
}

int dojo_suite_load(const char *dir, const char *name, dojo_suite *s, char *err, size_t n)
{
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->dir, sizeof s->dir, "%s/%s", dir, name);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/suite.json", s->dir);
    json_error_t e;
    s->doc = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
    if (s->doc == NULL)
        return bad(err, n, s, "cannot load suite.json", e.text);
    s->step = str(s->doc, "step");
    s->actor = str(s->doc, "actor");
    s->other_step = str(s->doc, "other_step");
    s->session = str(s->doc, "session");
    s->approver = str(s->doc, "approver");
    s->items = json_object_get(s->doc, "items");
    s->points = json_object_get(s->doc, "injection_points");
    s->users = json_object_get(s->doc, "user_tasks");
    s->injections = json_object_get(s->doc, "injection_tasks");
    s->history = json_object_get(s->doc, "history");
    s->baseline = json_object_get(s->doc, "baseline");
    if (s->step == NULL || s->actor == NULL || s->session == NULL || !json_is_object(s->items) ||
        !json_is_object(s->points) || !json_is_array(s->users) || !json_is_array(s->injections) ||
        str(s->doc, "workflow") == NULL)
        return bad(err, n, s,
                   "suite.json needs workflow, step, actor, session, items, "
                   "injection_points, user_tasks and injection_tasks",
                   NULL);
    if (load_workflow(s, err, n) != 0 || check_items(s, err, n) != 0)
        return -1;
    if (json_object_get(s->items, s->session) == NULL)
        return bad(err, n, s, "the session item is not an item", s->session);
    return check_tasks(s, err, n);
}

void dojo_suite_free(dojo_suite *s)
{
    json_decref(s->doc);
    json_decref(s->workflow);
    free(s->workflow_text);
    memset(s, 0, sizeof *s);
}
