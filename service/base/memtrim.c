/* memtrim.c - trims the allocator's free memory once a burst of
 * connections is over (memtrim.h). */
#include "memtrim.h"

#include "log.h"
#include "loop.h"
#include "metrics.h"

#include <malloc.h>
#include <stdatomic.h>
#include <time.h>

/* TICKETD_LOOPS' largest value (config.c). */
#define MEMTRIM_LOOPS 256

/* The most connections open since the last trim was queued. */
static _Atomic int peak;

/* Each loop's turn-end task, touched on its own thread only. */
static struct loop_task tasks[MEMTRIM_LOOPS];

static void trim(void *arg)
{
    (void)arg;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int released = malloc_trim(0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    metrics_inc(M_MEMORY_TRIMS);
    log_debug("memtrim: malloc_trim %s memory in %.3f ms", released ? "gave back" : "found no",
              (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    metrics_add(M_MEMORY_TRIMS_PENDING, -1);
}

void memtrim_connections(struct loop *l, int open)
{
    int p = atomic_load(&peak);
    while (open > p) {
        if (atomic_compare_exchange_weak(&peak, &p, open))
            return;
    }
    if (p - open < MEMTRIM_AFTER || open > p / 2)
        return;
    /* One loop wins the peak's reset and trims; the others go on. */
    if (!atomic_compare_exchange_strong(&peak, &p, open))
        return;
    struct loop_task *t = loop_slot(l, tasks, MEMTRIM_LOOPS, sizeof tasks[0]);
    if (t == NULL || t->queued)
        return;
    metrics_add(M_MEMORY_TRIMS_PENDING, 1);
    loop_at_turn_end(l, t, trim, NULL);
}
