/* test_session_lock.c - the session lock (session_lock.c) in the order
 * flow: a lock another request holds refuses the double click, and with
 * the defence off a lock held elsewhere is not asked. Rows of
 * order_rows.h. */
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

static void then_lock_not_ours(const struct order_result *res)
{
    (void)res;
    /* The script itself takes our marker back (so the key can be retried);
     * the lock is someone else's and stays: nothing to release. */
    assert_true(fake_cache.idem_begin.marker[0] != '\0');
    assert_int_equal(fake_cache.lock.calls, 1);
}

static void then_no_lock_completed(const struct order_result *res)
{
    (void)res;
    assert_true(fake_cache.complete.owner.null);
}

static const struct order_case rows[] = {
    /* layers 3 and 4: session lock and token */
    {"session lock taken", .lock_rc = TD_ECONFLICT, .outcome = ORDER_DUPLICATE_SUBMISSION,
     .layer = "session-lock", .calls = "order_begin order_find_request", .claims = CLAIMS_KEPT,
     .counts = {COUNTS(M_DUP_SESSION_LOCK, 1)}, .then = then_lock_not_ours},
    {"session lock off: a lock held elsewhere is not asked", .off = DEFENCE_SESSION_LOCK,
     .lock_rc = TD_ECONFLICT, .outcome = ORDER_CREATED, .calls = FULL_PATH,
     .then = then_no_lock_completed},
};

int main(void)
{
    return rows_run("session_lock", NULL, 0, rows, sizeof rows / sizeof rows[0]);
}
