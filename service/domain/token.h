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

/* What spending the token decided. */
enum token_verdict {
    TOKEN_GOES_ON,     /* spent by this key now or before, or nothing to check */
    TOKEN_INVALID,     /* unknown, someone else's, or spent by another key */
    TOKEN_UNAVAILABLE, /* Redis failed under policy strict */
};

/* The token for the key's script to spend: token, or NULL when the demo
 * switched the defence off (nothing is checked). */
const char *token_for_key(const struct app *app, const char *token);

/* Spends k's token on behalf of k's key, unless the key's script gave its
 * verdict already (k->token_rc). A token Redis forgot but that is genuine
 * lets the request go on: the database decides. Clears k->redis_ok when
 * Redis failed. */
enum token_verdict token_spend(struct app *app, struct inflight_key *k);

/* The token an order records in its transaction (token, or the one a cart
 * spent on its behalf), as its key (ORDERTOKEN_KEY_LEN + 1 bytes, filled),
 * or NULL when nothing is recorded. */
const char *token_to_record(const struct app *app, const char *token, char *key);

#endif
