#include "txretry.h"

#include "err.h"
#include "metrics.h"
#include "util.h"

#include <stdint.h>

static _Thread_local enum txretry_cause last_cause = TXRETRY_OTHER;

void txretry_note(enum txretry_cause cause)
{
    last_cause = cause;
}

enum txretry_cause txretry_noted(void)
{
    return last_cause;
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
            metrics_inc(cause_metric(last_cause));
            sleep_ms(backoff_ms(attempt));
        }
        last_cause = TXRETRY_OTHER;
        rc = fn(ctx);
        if (rc != TD_ERETRY)
            break;
    }
    return rc;
}
