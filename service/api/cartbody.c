/* cartbody.c - a cart's JSON body read into items (cartbody.h). Apart
 * from api_cart.c so that the parsing is pure and tested without a request. */
#include "cartbody.h"

#include "err.h"
#include "jsonv.h"

#include <stdio.h>
#include <string.h>

/* One item, the i-th; a refusal names its member as items[i].name. */
static int read_item(const json_t *item, size_t i, int64_t max_id, int64_t max_quantity,
                     struct idem_item *out, char *field, char *why, size_t why_cap)
{
    const char *key = json_string_value(json_object_get(item, "key"));
    if (!json_is_object(item)) {
        snprintf(field, CARTBODY_FIELD_MAX, "items[%zu]", i);
        snprintf(why, why_cap, "each item must be an object");
        return TD_EINVAL;
    }
    if (key == NULL || !idem_key_valid(key)) {
        snprintf(field, CARTBODY_FIELD_MAX, "items[%zu].key", i);
        snprintf(why, why_cap, "key must be a string of 1 to %d characters of A-Z a-z 0-9 . _ : -",
                 IDEM_KEY_MAX);
        return TD_EINVAL;
    }
    snprintf(out->key, sizeof out->key, "%s", key);
    if (jsonv_int(item, "session_id", 1, max_id, &out->session_id, why, why_cap) != TD_OK) {
        snprintf(field, CARTBODY_FIELD_MAX, "items[%zu].session_id", i);
        return TD_EINVAL;
    }
    if (jsonv_int(item, "quantity", 1, max_quantity, &out->quantity, why, why_cap) != TD_OK) {
        snprintf(field, CARTBODY_FIELD_MAX, "items[%zu].quantity", i);
        return TD_EINVAL;
    }
    return TD_OK;
}

int cartbody_parse(const json_t *body, int64_t max_id, int64_t max_quantity, struct cart_body *out,
                   char field[CARTBODY_FIELD_MAX], char *why, size_t why_cap)
{
    const json_t *items = json_object_get(body, "items");
    memset(out, 0, sizeof *out);
    snprintf(field, CARTBODY_FIELD_MAX, "items");
    if (!json_is_array(items) || json_array_size(items) < 1 ||
        json_array_size(items) > CART_MAX_ITEMS) {
        snprintf(why, why_cap, "items must be an array of 1 to %d items", CART_MAX_ITEMS);
        return TD_EINVAL;
    }
    size_t n = json_array_size(items);
    for (size_t i = 0; i < n; i++) {
        if (read_item(json_array_get(items, i), i, max_id, max_quantity, &out->items[i], field, why,
                      why_cap) != TD_OK) {
            memset(out, 0, sizeof *out);
            return TD_EINVAL;
        }
        /* Two items under one key would be one order answered twice. */
        for (size_t j = 0; j < i; j++) {
            if (strcmp(out->items[j].key, out->items[i].key) == 0) {
                snprintf(field, CARTBODY_FIELD_MAX, "items[%zu].key", i);
                snprintf(why, why_cap, "key %s is also the key of items[%zu]", out->items[i].key,
                         j);
                memset(out, 0, sizeof *out);
                return TD_EINVAL;
            }
        }
    }
    out->n = n;
    return TD_OK;
}
