/* test_token.c - the one-time order token (token.c) in the order flow:
 * an unknown token refused, a signed token Redis forgot let through to the
 * database (and recorded with the order), a spent, expired or another
 * user's token refused, no token when none is required, and the defence
 * and its atomic spend switched off. Rows of order_rows.h. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fakes.h"
#include "order_rows.h"

#include "defences.h"
#include "err.h"
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void then_token_spent_for_key(const struct order_result *res)
{
    (void)res;
    /* The token is spent on behalf of this key: its retries may bring it.
     * Both the marker and the lock are ours and both go. */
    assert_string_equal(fake_cache.token_take.key, KEY);
    assert_int_equal(fake_cache.release.session_id, SESSION);
}

static const struct order_case rows[] = {
    {"token invalid", .token_rc = TD_ENOTFOUND, .outcome = ORDER_TOKEN_INVALID, .layer = "token",
     .calls = TOKEN_THEN_DB, .claims = CLAIMS_RELEASED, .counts = {COUNTS(M_DUP_TOKEN, 1)},
     .then = then_token_spent_for_key},
    /* Issued by us to this user, unexpired, and unknown to Redis: Redis
     * lost it. The request goes on; the database decides. */
    {"signed token Redis forgot", .token = TOK_SIGNED, .token_rc = TD_ENOTFOUND,
     .outcome = ORDER_CREATED, .calls = FULL_PATH, .recorded = RECORDED_SENT,
     .counts = {COUNTS(M_TOKEN_FORGOTTEN, 1)}},
    /* Only a token that bought nothing may come again: a deadlock retried
     * records the same token, and never a sold-out one's key twice. */
    {"deadlock retried: the token recorded with the order", .deadlocks = 1, .token = TOK_SIGNED,
     .token_rc = TD_ENOTFOUND, .outcome = ORDER_CREATED, .recorded = RECORDED_SENT,
     .calls = "order_begin order_create order_create order_complete"},
    {"signed token spent by another key", .token = TOK_SIGNED, .token_rc = TD_ECONFLICT,
     .outcome = ORDER_TOKEN_INVALID, .layer = "token", .calls = TOKEN_THEN_DB},
    {"signed token, expired", .token = TOK_EXPIRED, .token_rc = TD_ENOTFOUND,
     .outcome = ORDER_TOKEN_INVALID, .layer = "token", .calls = TOKEN_THEN_DB},
    {"signed token of another user", .token = TOK_OTHER_USER, .token_rc = TD_ENOTFOUND,
     .outcome = ORDER_TOKEN_INVALID, .layer = "token", .calls = TOKEN_THEN_DB},
    /* TICKETD_ORDER_TOKEN_REQUIRED=0: the API passes no token. */
    {"no token sent", .token = TOK_NONE, .token_rc = TD_ENOTFOUND, .outcome = ORDER_CREATED,
     .calls = FULL_PATH, .recorded = RECORDED_NONE},
    {"token off: an unknown token is not asked", .off = DEFENCE_TOKEN, .token_rc = TD_ENOTFOUND,
     .outcome = ORDER_CREATED, .calls = FULL_PATH, .recorded = RECORDED_NONE},
    /* The naive GET-then-spend (the cache adapter's, cache_naive.h) shows
     * what Redis alone lets through: the domain skips the database's
     * record of the token, and leaves the spend to the port. */
    {"token-atomic off: the database records no token", .off = DEFENCE_TOKEN_ATOMIC,
     .outcome = ORDER_CREATED, .calls = FULL_PATH, .recorded = RECORDED_NONE},
};

int main(void)
{
    return rows_run("token", NULL, 0, rows, sizeof rows / sizeof rows[0]);
}
