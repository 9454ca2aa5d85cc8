/* test_response_cache.c - the response cache (response_cache.c) in the
 * order flow: the in-process copy answers before any port is asked, the
 * Redis record replays, another payload under the key is refused, and
 * with the defence off neither copy answers. Rows of order_rows.h. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fakes.h"
#include "order_rows.h"

#include "defences.h"
#include "metrics.h"
#include "respcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void then_nothing_kept_in_process(const struct order_result *res)
{
    (void)res;
    assert_int_equal(respcache_size(rows_app.respcache), 0);
}

static const struct order_case rows[] = {
    /* layer 1: the response cache; answered before any port is asked,
     * the token included */
    {"local cache replays", .local = LOCAL_SAME, .outcome = ORDER_REPLAYED,
     .layer = "response-cache", .status = 201, .body = LOCAL_BODY, .calls = "",
     .counts = {COUNTS(M_DUP_RESPONSE_CACHE, 1)}},
    {"local cache: another quantity is another payload", .local = LOCAL_OTHER_QTY,
     .outcome = ORDER_KEY_REUSED, .layer = "response-cache", .calls = "",
     .counts = {COUNTS(M_DUP_KEY_REUSED, 1)}},
    {"local cache: another session is another payload", .local = LOCAL_SAME, .session_delta = 1,
     .outcome = ORDER_KEY_REUSED, .layer = "response-cache", .calls = ""},
    {"local cache is per user", .local = LOCAL_SAME, .user_delta = 1, .outcome = ORDER_CREATED,
     .calls = FULL_PATH},
    {"no local cache: Redis is asked", .local = LOCAL_OFF, .outcome = ORDER_CREATED,
     .calls = FULL_PATH},
    /* No lock, no token, no database; nothing released, since the record
     * under the key is not this request's; copied in-process. */
    {"Redis record replays", .under_key = KEY_DONE, .outcome = ORDER_REPLAYED,
     .layer = "response-cache", .status = 201, .body = REDIS_BODY, .calls = "order_begin",
     .cached = CACHED, .claims = CLAIMS_KEPT, .counts = {COUNTS(M_DUP_RESPONSE_CACHE, 1)}},
    {"Redis record of another payload", .under_key = KEY_DONE_OTHER_QTY,
     .outcome = ORDER_KEY_REUSED, .layer = "response-cache", .calls = "order_begin",
     .cached = NOT_CACHED, .counts = {COUNTS(M_DUP_KEY_REUSED, 1)}},
    /* each defence switched off (TICKETD_DEFENSES, demo only) */
    {"response cache off: neither copy answers", .off = DEFENCE_RESPONSE_CACHE, .local = LOCAL_SAME,
     .under_key = KEY_DONE, .outcome = ORDER_CREATED, .calls = LOCK_APART},
    {"response cache off: a success is not kept in-process", .off = DEFENCE_RESPONSE_CACHE,
     .outcome = ORDER_CREATED, .calls = FULL_PATH, .then = then_nothing_kept_in_process},
};

int main(void)
{
    return rows_run("response_cache", NULL, 0, rows, sizeof rows / sizeof rows[0]);
}
