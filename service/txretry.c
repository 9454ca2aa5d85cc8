#include "txretry.h"

#include "err.h"
#include "metrics.h"
#include "util.h"

#include <stdint.h>

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
            metrics_inc(M_TX_RETRIES);
            sleep_ms(backoff_ms(attempt));
        }
        rc = fn(ctx);
        if (rc != TD_ERETRY)
            break;
    }
    return rc;
}
