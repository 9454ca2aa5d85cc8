/* api_sessions.c - the sessions (shows, with their seats) resource. */
#include "api_internal.h"
#include "err.h"
#include "jsonv.h"
#include "store.h"

#include <stdio.h>
#include <string.h>

#define PRICE_MAX 100000000 /* one million in cents */
#define STOCK_MAX 10000000

/* Counts UTF-8 code points; jansson has already checked the encoding. */
static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s != '\0'; s++) {
        if (((unsigned char)*s & 0xC0) != 0x80)
            n++;
    }
    return n;
}

void api_sessions_create(struct req *r, struct resp *w)
{
    char why[160];
    const char *title;
    int64_t price, stock;
    struct session s;
    json_t *body = api_body_object(r, w);
    if (body == NULL)
        return;
    if (jsonv_string(body, "title", TITLE_MAX * 4, &title, why, sizeof why) != TD_OK ||
        utf8_chars(title) > TITLE_MAX) {
        resp_problem(w, PROBLEM_VALIDATION_FAILED, "title", "title must be 1 to %d characters",
                     TITLE_MAX);
        goto out;
    }
    if (jsonv_int(body, "price_cents", 0, PRICE_MAX, &price, why, sizeof why) != TD_OK) {
        resp_problem(w, PROBLEM_VALIDATION_FAILED, "price_cents", "%s", why);
        goto out;
    }
    if (jsonv_int(body, "stock", 0, STOCK_MAX, &stock, why, sizeof why) != TD_OK) {
        resp_problem(w, PROBLEM_VALIDATION_FAILED, "stock", "%s", why);
        goto out;
    }
    int rc = store_session_create(title, price, stock, &s);
    if (rc != TD_OK) {
        api_fail(w, rc, "creating the session");
        goto out;
    }
    char location[64];
    snprintf(location, sizeof location, "/api/v1/sessions/%lld", (long long)s.id);
    resp_json(w, 201, api_session_json(&s));
    resp_header_add(w, "Location", location);
out:
    json_decref(body);
}

void api_session_get(struct req *r, struct resp *w)
{
    int64_t id;
    struct session s;
    if (!api_parse_id(r->match.params[0], &id)) {
        resp_problem(w, PROBLEM_SESSION_NOT_FOUND, NULL, "no session %s", r->match.params[0]);
        return;
    }
    int rc = store_session_get(id, &s);
    if (rc == TD_ENOTFOUND) {
        resp_problem(w, PROBLEM_SESSION_NOT_FOUND, NULL, "no session %lld", (long long)id);
        return;
    }
    if (rc != TD_OK) {
        api_fail(w, rc, "reading the session");
        return;
    }
    resp_json(w, 200, api_session_json(&s));
}
