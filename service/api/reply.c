/* reply.c - what the handlers share to read a request's body and answer
 * it (reply.h). */
#include "reply.h"

#include "auth.h"
#include "err.h"
#include "jsonv.h"
#include "util.h"

#include <stdlib.h>

/* The longest member name a problem's `field` repeats. */
#define API_FIELD_MAX 64

json_t *api_body_object(const struct req *r, struct resp *w)
{
    char why[200];
    if (r->body_len == 0) {
        resp_problem(w, PROBLEM_INVALID_JSON, NULL, "a JSON object body is required");
        return NULL;
    }
    char field[API_FIELD_MAX + 1];
    json_t *o = jsonv_parse_body(r->body, r->body_len, field, sizeof field, why, sizeof why);
    if (o == NULL && field[0] != '\0')
        resp_problem(w, PROBLEM_VALIDATION_FAILED, field, "%s", why);
    else if (o == NULL)
        resp_problem(w, PROBLEM_INVALID_JSON, NULL, "%s", why);
    return o;
}

bool api_body_shallow(const struct req *r, struct resp *w)
{
    char why[200];
    char field[API_FIELD_MAX + 1];
    if (jsonv_depth_ok(r->body, r->body_len, field, sizeof field, why, sizeof why))
        return true;
    if (field[0] != '\0')
        resp_problem(w, PROBLEM_VALIDATION_FAILED, field, "%s", why);
    else
        resp_problem(w, PROBLEM_INVALID_JSON, NULL, "%s", why);
    return false;
}

bool api_no_input(const struct req *r, struct resp *w)
{
    if (r->body_len == 0)
        return true;
    json_t *b = api_body_object(r, w);
    if (b == NULL)
        return false;
    bool ok = json_object_size(b) == 0;
    if (!ok) {
        const char *key = json_object_iter_key(json_object_iter(b));
        resp_problem(w, PROBLEM_VALIDATION_FAILED, key, "this request takes no fields");
    }
    json_decref(b);
    return ok;
}

void api_fail(struct resp *w, int err, const char *what)
{
    if (err == TD_EUNAVAIL || err == TD_ERETRY) {
        resp_problem(w, PROBLEM_DEPENDENCY_UNAVAILABLE, NULL,
                     "%s: a dependency is unavailable; retry later", what);
        resp_header_add(w, "Retry-After", "1");
        return;
    }
    resp_problem(w, PROBLEM_INTERNAL, NULL, "%s failed", what);
}

json_t *api_session_json(const struct session *s)
{
    return json_pack("{s:I, s:s, s:I, s:I, s:I, s:I}", "id", (json_int_t)s->id, "title", s->title,
                     "price_cents", (json_int_t)s->price_cents, "capacity", (json_int_t)s->capacity,
                     "stock", (json_int_t)s->stock, "version", (json_int_t)s->version);
}

json_t *api_order_json(const struct order *o)
{
    json_t *j = json_object();
    json_object_set_new(j, "order_no", json_string(o->order_no));
    json_object_set_new(j, "user_id", json_integer(o->user_id));
    json_object_set_new(j, "session_id", json_integer(o->session_id));
    json_object_set_new(j, "quantity", json_integer(o->quantity));
    json_object_set_new(j, "amount_cents", json_integer(o->amount_cents));
    json_object_set_new(j, "status", json_string(order_status_name(o->status)));
    json_object_set_new(j, "version", json_integer(o->version));
    json_object_set_new(j, "created_at", json_string(o->created_at));
    json_object_set_new(j, "updated_at", json_string(o->updated_at));
    return j;
}

enum api_step api_hand_on(struct req *r, void *in)
{
    r->ctx = in;
    r->ctx_free = free;
    return API_ON_FIBER;
}

bool api_parse_id(const char *s, int64_t *out)
{
    return s != NULL && s[0] != '0' && parse_i64(s, 1, AUTH_MAX_USER_ID, out);
}
