/* cartbody.h - reading a cart's body, {"items": [{"key": "seat-a",
 * "session_id": 7, "quantity": 2}, ...]}: 1..CART_MAX_ITEMS items, each
 * key obeying the Idempotency-Key grammar (bare, no quotes) and unique
 * within the cart. Pure; thread-safe. */
#ifndef TICKETD_CARTBODY_H
#define TICKETD_CARTBODY_H

#include "cart.h"
#include "idem.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* The longest field name a refusal names ("items[19].session_id"). */
#define CARTBODY_FIELD_MAX 48

struct cart_body {
    struct idem_item items[CART_MAX_ITEMS];
    size_t n;
};

/* Reads body (borrowed) into *out (cleared on entry); session ids in
 * 1..max_id, quantities in 1..max_quantity. Returns TD_OK, or TD_EINVAL
 * with the field refused in field ("items", "items[3].key") and the reason
 * in why (why_cap bytes). */
int cartbody_parse(const json_t *body, int64_t max_id, int64_t max_quantity, struct cart_body *out,
                   char field[CARTBODY_FIELD_MAX], char *why, size_t why_cap);

#endif
