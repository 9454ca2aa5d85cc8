/* event_payload.c - the outbox payloads' JSON (event_payload.h). */
#include "event_payload.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dump(json_t *j)
{
    char *s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (s == NULL)
        abort(); /* jansson fails here only without memory (the strings are valid UTF-8) */
    return s;
}

char *event_paid_write(const struct order *o, const char *txn_id, const char *occurred_at)
{
    return dump(json_pack(
        "{s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:s,s:s}", "event_type", EVENT_ORDER_PAID, "order_no",
        o->order_no, "order_id", (json_int_t)o->id, "user_id", (json_int_t)o->user_id, "session_id",
        (json_int_t)o->session_id, "quantity", (json_int_t)o->quantity, "amount_cents",
        (json_int_t)o->amount_cents, "txn_id", txn_id, "occurred_at", occurred_at));
}

char *event_refund_write(const struct order *o, const char *txn_id, int64_t amount_cents,
                         const char *reason, const char *occurred_at)
{
    return dump(json_pack("{s:s,s:s,s:s,s:I,s:I,s:s,s:s}", "event_type", EVENT_REFUND_REQUIRED,
                          "txn_id", txn_id, "order_no", o->order_no, "user_id",
                          (json_int_t)o->user_id, "amount_cents", (json_int_t)amount_cents,
                          "reason", reason, "occurred_at", occurred_at));
}

bool event_paid_parse(const char *biz_key, const char *payload, size_t len, struct paid_event *pe,
                      const char **why)
{
    json_error_t err;
    bool ok = false;
    memset(pe, 0, sizeof *pe);
    *why = "payload is not a JSON object";
    if (payload == NULL || biz_key == NULL) {
        *why = "entry without payload or biz_key";
        return false;
    }
    json_t *j = json_loadb(payload, len, JSON_REJECT_DUPLICATES, &err);
    if (!json_is_object(j))
        goto out;
    const char *no = json_string_value(json_object_get(j, "order_no"));
    json_t *user = json_object_get(j, "user_id"), *amount = json_object_get(j, "amount_cents");
    if (no == NULL || strlen(no) > ORDER_NO_LEN || strcmp(no, biz_key) != 0) {
        *why = "order_no missing or not the biz_key";
        goto out;
    }
    if (!json_is_integer(user) || json_integer_value(user) < 1 || !json_is_integer(amount) ||
        json_integer_value(amount) < 0) {
        *why = "user_id or amount_cents missing or out of range";
        goto out;
    }
    snprintf(pe->order_no, sizeof pe->order_no, "%s", no);
    pe->user_id = json_integer_value(user);
    pe->amount_cents = json_integer_value(amount);
    *why = NULL;
    ok = true;
out:
    json_decref(j);
    return ok;
}
