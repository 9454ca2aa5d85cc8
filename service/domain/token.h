/* token.h - the one-time order token (orders.h, layer 4): issued by POST
 * /api/v1/tokens, bound to the user, spent once, by the first
 * Idempotency-Key that presents it; that key's retries pass again (the
 * same intent), any other key is refused. Spent in the key's own script
 * when it can be (cache_key_begin), else on its own here; recorded with
 * the order in its transaction, so that it stays spent when Redis forgets
 * (the token's unique key, unique_index.h). Thread-safe. */
#ifndef TICKETD_TOKEN_H
#define TICKETD_TOKEN_H

#include "ordertoken.h"

#include <stdbool.h>

struct app;
struct inflight_key;
struct order_result;

/* The token for the key's script to spend: token, or NULL when the demo
 * switched the defence off (nothing is checked). */
const char *token_for_key(const struct app *app, const char *token);

/* Spends k's token on behalf of k's key, unless the key's script gave its
 * verdict already (k->token_rc), and says what the request answers when
 * the token stops it. True when it goes on: spent by this key now or
 * before, nothing to check, or a genuine token Redis forgot (the database
 * decides). Else false with res's outcome and layer set: ORDER_TOKEN_INVALID
 * by LAYER_TOKEN (unknown, someone else's, or spent by another key), or
 * ORDER_UNAVAILABLE (Redis failed under policy strict). Clears k->redis_ok
 * when Redis failed. An order and a cart's batch key alike answer from it. */
bool token_passes(struct app *app, struct inflight_key *k, struct order_result *res);

/* The token an order records in its transaction (token, or the one a cart
 * spent on its behalf), as its key (ORDERTOKEN_KEY_LEN + 1 bytes, filled),
 * or NULL when nothing is recorded. */
const char *token_to_record(const struct app *app, const char *token, char *key);

#endif
