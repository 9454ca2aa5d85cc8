/* txretry.c - a transaction run again after a deadlock, a lock wait or a
 * certification conflict, with jittered back-off (txretry.h). Apart so that
 * every transaction of the service retries by one rule. */
#include "txretry.h"

#include "err.h"
#include "fiber.h"
#include "metrics.h"
#include "util.h"

#include <stdint.h>

/* The cause lives in the fiber's slot, not in a thread-local: many
 * requests' fibers share a loop thread, and one that parks between its
 * failed attempt and its retry would otherwise read a neighbour's cause.
 * Off a fiber the slot is the thread's own. Stored as the enum's value
 * plus one, so that a new fiber's NULL slot reads TXRETRY_OTHER. */
static struct fiber_key cause_key = FIBER_KEY_INIT;

void txretry_note(enum txretry_cause cause)
{
    *fiber_slot(&cause_key) = (void *)((uintptr_t)cause + 1);
}

enum txretry_cause txretry_noted(void)
{
    uintptr_t v = (uintptr_t)*fiber_slot(&cause_key);
    return v == 0 ? TXRETRY_OTHER : (enum txretry_cause)(v - 1);
}

static enum metric cause_metric(enum txretry_cause cause)
{
    switch (cause) {
    case TXRETRY_DEADLOCK:
        return M_TX_RETRIES_DEADLOCK;
    case TXRETRY_LOCK_WAIT:
        return M_TX_RETRIES_LOCK_WAIT;
    case TXRETRY_CERTIFICATION:
        return M_TX_RETRIES_CERTIFICATION;
    case TXRETRY_OTHER:
        break;
    }
    return M_TX_RETRIES_OTHER;
}

static int64_t backoff_ms(int attempt)
{
    int64_t window = (int64_t)2 << (attempt < 6 ? attempt : 6);
    return 1 + (int64_t)rand_below((uint64_t)window);
}

int txretry_run(int retries, int (*fn)(void *ctx), void *ctx)
{
    int rc = TD_ERETRY;
    for (int attempt = 0; attempt <= retries; attempt++) {
        if (attempt > 0) {
            metrics_inc(cause_metric(txretry_noted()));
            /* On a fiber the loop serves other requests meanwhile: a
             * sleep would stop every fiber of the thread. */
            fiber_sleep_ms(backoff_ms(attempt));
        }
        txretry_note(TXRETRY_OTHER);
        rc = fn(ctx);
        if (rc != TD_ERETRY)
            break;
    }
    return rc;
}
