/* api_keys.c - GET /api/v1/idempotency-keys/{key}: what became of one of
 * the caller's keys (keys.h), for a client that lost its answer. */
#include "api_internal.h"
#include "app.h"
#include "err.h"
#include "idem.h"
#include "keys.h"

#include <stdio.h>
#include <string.h>

/* The order number in an order's answer as api_order_render wrote it. */
static bool order_no_of(const char *body, size_t len, char out[ORDER_NO_LEN + 1])
{
    json_t *j = json_loadb(body, len, 0, NULL);
    const char *no = json_string_value(json_object_get(j, "order_no"));
    bool ok = no != NULL && order_no_valid(no);
    if (ok)
        snprintf(out, ORDER_NO_LEN + 1, "%s", no);
    json_decref(j);
    return ok;
}

static json_t *status_json(const char *key, const struct key_status *ks)
{
    const char *kind = ks->kind == KEY_KIND_ORDER ? "order" : "batch";
    if (ks->state == KEY_IN_PROGRESS)
        return json_pack("{s:s,s:s,s:s,s:I}", "key", key, "state", "IN_PROGRESS", "kind", kind,
                         "age_ms", (json_int_t)ks->age_ms);
    if (ks->kind == KEY_KIND_BATCH)
        return json_pack("{s:s,s:s,s:s,s:i,s:b}", "key", key, "state", "COMPLETED", "kind", kind,
                         "status", ks->status, "complete", ks->complete);
    char location[64];
    snprintf(location, sizeof location, "/api/v1/orders/%s", ks->order_no);
    return json_pack("{s:s,s:s,s:s,s:i,s:s,s:s}", "key", key, "state", "COMPLETED", "kind", kind,
                     "status", ks->status, "order_no", ks->order_no, "location", location);
}

void api_idempotency_key_get(struct req *r, struct resp *w)
{
    struct key_status ks;
    const char *key = r->match.params[0];
    /* The key as the Idempotency-Key header carries it, bare: a path has
     * no quotes to strip. */
    if (!idem_key_valid(key)) {
        resp_problem(w, PROBLEM_IDEMPOTENCY_KEY_INVALID, NULL,
                     "a key is 1 to %d characters of A-Z a-z 0-9 . _ : -", IDEM_KEY_MAX);
        return;
    }
    int rc = keys_lookup(r->app, r->who.user_id, key, order_no_of, &ks);
    if (rc == TD_ENOTFOUND) {
        /* Another user's key is this same answer: keys are per user, and
         * nothing tells a stranger that one exists. */
        resp_problem(w, PROBLEM_IDEMPOTENCY_KEY_NOT_FOUND, NULL,
                     "no answer and no request in flight under key %s", key);
        return;
    }
    if (rc != TD_OK) {
        api_fail(w, rc, "looking the key up");
        return;
    }
    resp_json(w, 200, status_json(key, &ks));
    /* What a key has become changes until it completes; never from a cache. */
    resp_header_add(w, "Cache-Control", "no-store");
}
