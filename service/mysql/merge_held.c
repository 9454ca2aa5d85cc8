/* merge_held.c - the sessions whose row another transaction holds
 * (merge_held.h). */
#include "merge_held.h"

#include "log.h"
#include "util.h"

#include <stdatomic.h>

/* Sessions whose row a transaction waited for in vain, at most: one or
 * two rows are held at a time, not dozens. When the table is full, the
 * session noted longest ago makes room (a mark ends only with an order of
 * its session, and a session may get none again). */
#define HELD_MAX 16

/* A session whose row lock a transaction waited for until the server's
 * bound (1205: another transaction holds the row, an administrator's, a
 * slow client's, a Galera apply). Its orders stay out of batches, where
 * their wait would hold every other order of the batch and the orders
 * queued behind it: one at a time goes alone, as the probe, and while it
 * waits the others are answered 503 at once (nothing of them was written;
 * Retry-After). The first of its orders that meets the row free (placed,
 * sold out, anything but another lock wait) ends the mark.
 *
 * Process-wide, so that the row one loop found held keeps it out of every
 * loop's batches: each slot is two atomics, a session id (0: free) and
 * its probe flag, taken and given back by compare-and-swap. A race costs
 * at most a slot noted twice or two probes at once. */
static struct merge_held {
    _Atomic int64_t session;
    atomic_bool probing;
    _Atomic int64_t noted_ms; /* when it was noted (mono_ms) */
} held[HELD_MAX];

struct merge_held *merge_held_find(int64_t session)
{
    for (int i = 0; i < HELD_MAX; i++) {
        if (atomic_load(&held[i].session) == session)
            return &held[i];
    }
    return NULL;
}

bool merge_held_probe(struct merge_held *h)
{
    bool idle = false;
    return atomic_compare_exchange_strong(&h->probing, &idle, true);
}

void merge_held_probed(struct merge_held *h)
{
    atomic_store(&h->probing, false);
}

/* Notes that session's row was held past the bound (nothing when it is
 * noted already, or the table is full). */
void merge_held_note(int64_t session)
{
    if (merge_held_find(session) != NULL)
        return;
    int at = -1, oldest = -1;
    for (int i = 0; i < HELD_MAX && at < 0; i++) {
        int64_t free_slot = 0;
        if (atomic_compare_exchange_strong(&held[i].session, &free_slot, session))
            at = i;
        else if (!atomic_load(&held[i].probing) &&
                 (oldest < 0 ||
                  atomic_load(&held[i].noted_ms) < atomic_load(&held[oldest].noted_ms)))
            oldest = i;
    }
    if (at < 0 && oldest >= 0) {
        /* Full: the oldest mark whose probe is not running makes room (a
         * race may have freed or taken it meanwhile; then this session is
         * not remembered, and its orders keep joining batches). */
        int64_t was = atomic_load(&held[oldest].session);
        if (was != 0 && atomic_compare_exchange_strong(&held[oldest].session, &was, session))
            at = oldest;
    }
    if (at < 0)
        return;
    atomic_store(&held[at].noted_ms, mono_ms());
    log_warn("mysql: session %lld: its row is held by another transaction; its orders go "
             "alone, one at a time, until one meets the row free",
             (long long)session);
}

void merge_held_forget(int64_t session)
{
    struct merge_held *h = merge_held_find(session);
    int64_t was = session;
    if (h != NULL && atomic_compare_exchange_strong(&h->session, &was, 0))
        log_info("mysql: session %lld: its row is free again", (long long)session);
}
