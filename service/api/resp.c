/* resp.c - the response a handler fills, kept free of the HTTP library
 * (resp.h): status, headers, body, problems. Apart so that the handlers
 * and their tests never see libmicrohttpd. */
#include "resp.h"

#include "log.h"
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

void resp_init(struct resp *w)
{
    memset(w, 0, sizeof *w);
    w->status = 500;
}

static void clear_headers(struct resp *w)
{
    for (int i = 0; i < w->nheaders; i++) {
        free(w->headers[i].name);
        free(w->headers[i].value);
    }
    w->nheaders = 0;
}

void resp_reset(struct resp *w)
{
    clear_headers(w);
    free(w->body);
    resp_init(w);
}

static void set_body(struct resp *w, char *body, size_t len)
{
    free(w->body);
    w->body = body;
    w->body_len = len;
}

void resp_json(struct resp *w, int status, json_t *obj)
{
    char *s = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (s == NULL) {
        /* jansson only fails here on allocation failure. */
        log_error("json_dumps failed");
        abort();
    }
    w->status = status;
    w->content_type = "application/json";
    set_body(w, s, strlen(s));
}

void resp_json_take(struct resp *w, int status, char **body, size_t len, bool replayed)
{
    w->status = status;
    w->content_type = "application/json";
    set_body(w, *body, len);
    *body = NULL;
    if (replayed)
        resp_header_add(w, "Idempotent-Replayed", "true");
}

void resp_raw(struct resp *w, int status, const char *content_type, const char *body, size_t len)
{
    w->status = status;
    w->content_type = content_type;
    set_body(w, xstrndup(body, len), len);
}

void resp_problem(struct resp *w, enum problem p, const char *field, const char *fmt, ...)
{
    const struct problem_info *info = problem_info_of(p);
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);

    json_t *o = json_object();
    json_object_set_new(o, "type", json_string(info->type));
    json_object_set_new(o, "title", json_string(info->title));
    json_object_set_new(o, "status", json_integer(info->status));
    /* detail may echo client input that is not valid UTF-8. */
    json_t *d = json_string(detail);
    json_object_set_new(o, "detail", d != NULL ? d : json_string("(detail not shown)"));
    json_object_set_new(o, "code", json_string(info->code));
    if (field != NULL)
        json_object_set_new(o, "field", json_string(field));

    resp_json(w, info->status, o);
    w->content_type = "application/problem+json";
    w->code = info->code;
}

void resp_header_add(struct resp *w, const char *name, const char *value)
{
    for (int i = 0; i < w->nheaders; i++) {
        if (strcasecmp(w->headers[i].name, name) == 0) {
            free(w->headers[i].value);
            w->headers[i].value = xstrdup(value);
            return;
        }
    }
    if (w->nheaders == RESP_MAX_HEADERS) {
        log_error("too many response headers; dropping %s", name);
        return;
    }
    w->headers[w->nheaders].name = xstrdup(name);
    w->headers[w->nheaders].value = xstrdup(value);
    w->nheaders++;
}

const char *resp_get_header(const struct resp *w, const char *name)
{
    for (int i = 0; i < w->nheaders; i++) {
        if (strcasecmp(w->headers[i].name, name) == 0)
            return w->headers[i].value;
    }
    return NULL;
}
