/* fake_calls.c - the call log both port fakes write to, and the counters
 * a test compares before and after its call (fakes.h). */
#include "fakes.h"
#include "fake_keys.h"
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char fake_calls[1024];

void fake_call(const char *name)
{
    size_t n = strlen(fake_calls);
    int w = snprintf(fake_calls + n, sizeof fake_calls - n, "%s%s", n > 0 ? " " : "", name);
    if (w < 0 || (size_t)w >= sizeof fake_calls - n) {
        /* A test that makes this many calls has a loop gone wrong. */
        fprintf(stderr, "fake call log overflow at %s\n", name);
        abort();
    }
}

void fakes_reset(void)
{
    fake_calls[0] = '\0';
    fake_store_reset();
    fake_cache_reset();
    fake_keys_reset();
}

static int64_t metrics_marked[M_COUNT];

void fake_metrics_mark(void)
{
    for (int m = 0; m < M_COUNT; m++)
        metrics_marked[m] = metrics_get(m);
}

int64_t fake_metrics_delta(enum metric m)
{
    return metrics_get(m) - metrics_marked[m];
}
