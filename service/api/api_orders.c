/* api_orders.c - the orders resource, every /api/v1/orders route but the
 * cart's batch (api_cart.c): JSON and headers in, the domain's answer out.
 * The defences live in orders.c, cancel and complete in lifecycle.c. */
#include "api_internal.h"
#include "app.h"
#include "err.h"
#include "idem.h"
#include "jsonv.h"
#include "lifecycle.h"
#include "orders.h"
#include "prefer.h"
#include "store.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_DEFAULT 20
#define LIST_MAX     100
#define TOKEN_MAX    128

/* Whether JSON writes s as it is: no byte a string must escape, and
 * nothing but ASCII (jansson's escapes are not repeated here). */
static bool plain_json(const char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
            return false;
    }
    return true;
}

/* The answer to an order placed (or found under its key): 201 and the
 * order. Every new order renders one, so it is written in one format
 * call, byte for byte what json_dumps(api_order_json(o), JSON_COMPACT)
 * gives (test_api_orders compares the two), without the tree of ten
 * allocations and the dump's buffer, which took 4.4% of ticketd's CPU
 * per new order (docs/speed.md, "An order's answer in one format
 * call"). The strings ticketd writes (a number of digits, a status name,
 * times) never need an escape; one that would takes jansson's path. */
char *api_order_render(const struct order *o, int *status, size_t *len)
{
    *status = 201;
    const char *st = order_status_name(o->status);
    if (plain_json(o->order_no) && plain_json(st) && plain_json(o->created_at) &&
        plain_json(o->updated_at)) {
        char *s = xasprintf("{\"order_no\":\"%s\",\"user_id\":%lld,\"session_id\":%lld,"
                            "\"quantity\":%lld,\"amount_cents\":%lld,\"status\":\"%s\","
                            "\"version\":%lld,\"created_at\":\"%s\",\"updated_at\":\"%s\"}",
                            o->order_no, (long long)o->user_id, (long long)o->session_id,
                            (long long)o->quantity, (long long)o->amount_cents, st,
                            (long long)o->version, o->created_at, o->updated_at);
        *len = strlen(s);
        return s;
    }
    json_t *j = api_order_json(o);
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (s == NULL)
        abort(); /* jansson fails here only without memory */
    *len = strlen(s);
    return s;
}

/* A failure the demo keeps under its key (forget-failures off): the
 * problem's bare RFC 9457 fields, as replays of the key give them. */
static char *failure_render(enum order_outcome oc, int *status, size_t *len)
{
    const struct problem_info *pi =
        problem_info_of(oc == ORDER_SOLD_OUT ? PROBLEM_SOLD_OUT : PROBLEM_DEPENDENCY_UNAVAILABLE);
    char *body = xasprintf("{\"type\":\"%s\",\"title\":\"%s\",\"status\":%d,\"code\":\"%s\"}",
                           pi->type, pi->title, pi->status, pi->code);
    *status = pi->status;
    *len = strlen(body);
    return body;
}

const struct order_render api_order_views = {api_order_render, failure_render};

/* Location of an answer. A replay of a record's bytes has only its body:
 * api_order_json writes order_no first, so a body of ours starts with it;
 * anything else (a record from another version) is parsed. */
static void location_of(const struct order_result *res, char *out, size_t cap)
{
    static const char prefix[] = "{\"order_no\":\"";
    size_t p = sizeof prefix - 1;
    const char *body = res->body;
    size_t len = res->body_len;
    out[0] = '\0';
    if (res->order_no[0] != '\0') {
        snprintf(out, cap, "/api/v1/orders/%s", res->order_no);
        return;
    }
    if (len > p + ORDER_NO_LEN && memcmp(body, prefix, p) == 0 && body[p + ORDER_NO_LEN] == '"') {
        snprintf(out, cap, "/api/v1/orders/%.*s", ORDER_NO_LEN, body + p);
        return;
    }
    json_t *o = json_loadb(body, len, 0, NULL);
    const char *no = json_string_value(json_object_get(o, "order_no"));
    if (no != NULL)
        snprintf(out, cap, "/api/v1/orders/%s", no);
    json_decref(o);
}

bool api_read_key(struct req *r, struct resp *w, char *key)
{
    const char *hk = req_header(r, "Idempotency-Key");
    if (hk == NULL) {
        resp_problem(w, PROBLEM_IDEMPOTENCY_KEY_REQUIRED, NULL,
                     "send an Idempotency-Key header and reuse it for retries");
        return false;
    }
    if (!idem_parse_key(hk, key)) {
        resp_problem(w, PROBLEM_IDEMPOTENCY_KEY_INVALID, NULL,
                     "Idempotency-Key must be 1 to %d characters of A-Z a-z 0-9 . _ : -",
                     IDEM_KEY_MAX);
        return false;
    }
    return true;
}

bool api_read_token(struct req *r, struct resp *w, const char **token)
{
    *token = NULL;
    if (!r->app->cfg->order_token_required)
        return true;
    *token = req_header(r, "X-Order-Token");
    if (*token == NULL || (*token)[0] == '\0') {
        resp_problem(w, PROBLEM_ORDER_TOKEN_REQUIRED, NULL,
                     "get a token from POST /api/v1/tokens and send it as X-Order-Token");
        return false;
    }
    if (strlen(*token) > TOKEN_MAX)
        *token = "-"; /* cannot be ours; let the token defence refuse it */
    return true;
}

void api_say_wait(struct resp *w, int wait_s)
{
    char v[24];
    if (wait_s <= 0)
        return;
    snprintf(v, sizeof v, "wait=%d", wait_s);
    resp_header_add(w, "Preference-Applied", v);
}

int api_read_wait(struct req *r, struct resp *w)
{
    const char *v = req_header(r, "Prefer");
    int wait_s = v != NULL ? prefer_wait_s(v, strlen(v), r->app->cfg->max_wait_s) : 0;
    api_say_wait(w, wait_s);
    return wait_s;
}

static bool read_create_body(struct req *r, struct resp *w, int64_t *session_id, int64_t *quantity)
{
    char why[160];
    bool ok = false;
    json_t *body = api_body_object(r, w);
    if (body == NULL)
        return false;
    if (jsonv_int(body, "session_id", 1, AUTH_MAX_USER_ID, session_id, why, sizeof why) != TD_OK) {
        resp_problem(w, PROBLEM_VALIDATION_FAILED, "session_id", "%s", why);
        goto out;
    }
    if (jsonv_int(body, "quantity", 1, r->app->cfg->max_per_order, quantity, why, sizeof why) !=
        TD_OK) {
        resp_problem(w, PROBLEM_VALIDATION_FAILED, "quantity", "%s", why);
        goto out;
    }
    ok = true;
out:
    json_decref(body);
    return ok;
}

/* What the quick step read and checked, for the blocking step. */
struct create_input {
    char key[IDEM_KEY_MAX + 1];
    struct order_request rq;
};

enum api_step api_orders_create_quick(struct req *r, struct resp *w)
{
    struct create_input *in = xcalloc(1, sizeof *in);
    struct order_request *rq = &in->rq;
    struct order_result res;
    rq->user_id = r->who.user_id;
    rq->key = in->key;
    rq->wait_s = api_read_wait(r, w);

    if (!api_read_key(r, w, in->key) || !read_create_body(r, w, &rq->session_id, &rq->quantity) ||
        !api_read_token(r, w, &rq->token))
        goto out;
    /* A retry of a key this process answered: replayed here, by the loop
     * that read it, with no fiber and no I/O at all. */
    if (orders_replay_local(r->app, rq, &res)) {
        api_order_answer(w, rq, &res);
        goto out;
    }
    return api_hand_on(r, in);
out:
    free(in);
    return API_ANSWERED;
}

void api_orders_create(struct req *r, struct resp *w)
{
    struct create_input *in = r->ctx;
    struct order_result res;
    orders_create(r->app, &in->rq, &api_order_views, &res);
    api_order_answer(w, &in->rq, &res);
    api_say_wait(w, in->rq.wait_s);
}

void api_refuse_key_reused(struct resp *w, const char *what)
{
    resp_problem(w, PROBLEM_IDEMPOTENCY_KEY_REUSED, NULL,
                 "this Idempotency-Key was used with a different %s", what);
}

void api_refuse_in_progress(struct resp *w, const char *what)
{
    resp_problem(w, PROBLEM_REQUEST_IN_PROGRESS, NULL,
                 "the first %s with this Idempotency-Key is still being processed", what);
    resp_header_add(w, "Retry-After", "1");
}

void api_refuse_token(struct resp *w)
{
    resp_problem(w, PROBLEM_ORDER_TOKEN_INVALID, NULL,
                 "the order token is unknown, expired, spent or not yours");
}

void api_say_layer(struct resp *w, enum order_layer layer)
{
    w->layer = order_layer_name(layer);
    if (w->layer != NULL)
        resp_header_add(w, "Idempotency-Layer", w->layer);
}

void api_order_answer(struct resp *w, const struct order_request *rq, struct order_result *res)
{
    switch (res->outcome) {
    case ORDER_CREATED:
    case ORDER_REPLAYED: {
        char location[64];
        location_of(res, location, sizeof location);
        if (location[0] != '\0')
            resp_header_add(w, "Location", location);
        resp_json_take(w, res->status, &res->body, res->body_len, res->outcome == ORDER_REPLAYED);
        break;
    }
    case ORDER_KEY_REUSED:
        api_refuse_key_reused(w, "payload");
        break;
    case ORDER_IN_PROGRESS:
        api_refuse_in_progress(w, "request");
        break;
    case ORDER_DUPLICATE_SUBMISSION:
        resp_problem(w, PROBLEM_DUPLICATE_SUBMISSION, NULL,
                     "another order for this session is being placed right now");
        break;
    case ORDER_TOKEN_INVALID:
        api_refuse_token(w);
        break;
    case ORDER_SOLD_OUT:
        resp_problem(w, PROBLEM_SOLD_OUT, NULL, "not enough seats left for %lld",
                     (long long)rq->quantity);
        break;
    case ORDER_SESSION_NOT_FOUND:
        resp_problem(w, PROBLEM_SESSION_NOT_FOUND, "session_id", "no session %lld",
                     (long long)rq->session_id);
        break;
    case ORDER_UNAVAILABLE:
        api_fail(w, TD_EUNAVAIL, "placing the order");
        break;
    case ORDER_FAILED:
        api_fail(w, TD_EINTERNAL, "placing the order");
        break;
    }
    api_say_layer(w, res->layer);
    order_result_cleanup(res);
}

/* An order number as sent in the path, exactly (see order_no_valid); else
 * 404 before anything reads the body or the store: MariaDB would match
 * "<order_no> " (trailing spaces) to the order. */
static bool path_order_no(const struct req *r, struct resp *w)
{
    if (order_no_valid(r->match.params[0]))
        return true;
    resp_problem(w, PROBLEM_ORDER_NOT_FOUND, NULL, "no such order");
    return false;
}

void api_order_get(struct req *r, struct resp *w)
{
    struct order o;
    if (!path_order_no(r, w))
        return;
    int rc = store_order_get(r->match.params[0], r->who.user_id, &o);
    if (rc == TD_ENOTFOUND) {
        resp_problem(w, PROBLEM_ORDER_NOT_FOUND, NULL, "no order %s", r->match.params[0]);
        return;
    }
    if (rc != TD_OK) {
        api_fail(w, rc, "reading the order");
        return;
    }
    resp_json(w, 200, api_order_json(&o));
}

/* Cursors are opaque to clients: "o" + the id to continue below. */
static bool parse_cursor(const char *s, int64_t *before)
{
    return s[0] == 'o' && api_parse_id(s + 1, before);
}

void api_orders_list(struct req *r, struct resp *w)
{
    int64_t limit = LIST_DEFAULT, before = 0;
    const char *ls = req_query(r, "limit");
    const char *cs = req_query(r, "cursor");
    if (ls != NULL && !parse_i64(ls, 1, LIST_MAX, &limit)) {
        resp_problem(w, PROBLEM_VALIDATION_FAILED, "limit", "limit must be from 1 to %d", LIST_MAX);
        return;
    }
    if (cs != NULL && !parse_cursor(cs, &before)) {
        resp_problem(w, PROBLEM_VALIDATION_FAILED, "cursor", "cursor is not one we issued");
        return;
    }
    /* One more row than asked tells whether another page exists. */
    struct order *rows = xcalloc((size_t)limit + 1, sizeof *rows);
    int n = 0;
    int rc = store_order_list(r->who.user_id, before, (int)limit + 1, rows, &n);
    if (rc != TD_OK) {
        api_fail(w, rc, "listing orders");
        goto out;
    }
    json_t *arr = json_array();
    int shown = n > limit ? (int)limit : n;
    for (int i = 0; i < shown; i++)
        json_array_append_new(arr, api_order_json(&rows[i]));
    json_t *next = json_null();
    if (n > limit) {
        char cur[32];
        snprintf(cur, sizeof cur, "o%lld", (long long)rows[shown - 1].id);
        json_decref(next);
        next = json_string(cur);
    }
    resp_json(w, 200, json_pack("{s:o,s:o}", "orders", arr, "next_cursor", next));
out:
    free(rows);
}

/* The answer to a cancel or a complete. needs: the state the order must
 * be in; verb: what the change does to it ("cancelled"); what: the action,
 * for errors ("cancelling the order"). */
static void answer_change(struct resp *w, int rc, const struct order *o, const char *order_no,
                          const char *needs, const char *verb, const char *what)
{
    switch (rc) {
    case TD_OK:
        resp_json(w, 200, api_order_json(o));
        return;
    case TD_ENOTFOUND:
        resp_problem(w, PROBLEM_ORDER_NOT_FOUND, NULL, "no order %s", order_no);
        return;
    case TD_ECONFLICT:
        resp_problem(w, PROBLEM_INVALID_TRANSITION, NULL, "order is %s; only a %s order can be %s",
                     order_status_name(o->status), needs, verb);
        return;
    default:
        api_fail(w, rc, what);
    }
}

void api_order_cancel(struct req *r, struct resp *w)
{
    struct order o;
    if (!path_order_no(r, w) || !api_no_input(r, w))
        return;
    int rc = lifecycle_cancel(r->app, r->match.params[0], r->who.user_id, &o);
    answer_change(w, rc, &o, r->match.params[0], "PENDING_PAYMENT", "cancelled",
                  "cancelling the order");
}

void api_order_complete(struct req *r, struct resp *w)
{
    struct order o;
    if (!path_order_no(r, w) || !api_no_input(r, w))
        return;
    int rc = lifecycle_complete(r->app, r->match.params[0], &o);
    answer_change(w, rc, &o, r->match.params[0], "TICKETED", "completed", "completing the order");
}
