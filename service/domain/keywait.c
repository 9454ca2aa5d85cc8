/* keywait.c - Prefer: wait (keywait.h): the waiters of this process, the
 * park of their fibers and their wake-ups.
 *
 * A waiter is registered under its (user, key) before it watches the key,
 * so an announcement that arrives while the watch is on its way finds it.
 * The listener thread marks the waiters of an announced key and posts a
 * wake-up to each one's loop (loop_post); on that loop, the wake-up readies
 * the fiber only while it is parked in this wait (never while it waits for
 * Redis, whose reply would then be skipped). A waiter is freed by whoever
 * lets it go last: its fiber or a wake-up still on its way. */
#include "keywait.h"

#include "app.h"
#include "err.h"
#include "fiber.h"
#include "keyevents.h"
#include "idem.h"
#include "loop.h"
#include "metrics.h"
#include "store.h"
#include "util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEYWAIT_BUCKETS 256

struct waiter {
    int64_t user_id;
    char key[IDEM_KEY_MAX + 16]; /* as the cache knows it: "batch/<key>" for a cart */
    struct fiber *fiber;
    struct loop *loop;
    struct loop_timer timer; /* the next look, should no announcement come */
    bool parked;             /* in fiber_park here: on the loop's thread only */
    bool notified;           /* under mu */
    int refs;                /* under mu: the fiber's, and one per wake-up posted */
    struct waiter *prev, *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct waiter *buckets[KEYWAIT_BUCKETS]; /* under mu */

static unsigned bucket_of(int64_t user_id, const char *key)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)user_id;
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return (unsigned)(h % KEYWAIT_BUCKETS);
}

void keywait_start(struct keywait *kw, const struct app *app, int wait_s)
{
    kw->draining = &app->draining;
    kw->wait_s = wait_s > 0 ? wait_s : 0;
    kw->deadline_ms = mono_ms() + (int64_t)kw->wait_s * 1000;
    kw->waited = false;
}

/* Drops one hold on w; the last frees it. */
static void waiter_put(struct waiter *w)
{
    pthread_mutex_lock(&mu);
    bool last = --w->refs == 0;
    pthread_mutex_unlock(&mu);
    if (last)
        free(w);
}

/* On w's loop: the fiber goes on, if it is still parked in this wait. */
static void waiter_wake(struct waiter *w)
{
    if (!w->parked)
        return;
    w->parked = false;
    loop_timer_stop(w->loop, &w->timer);
    fiber_ready(w->fiber);
}

static void on_timer(void *arg)
{
    waiter_wake(arg);
}

static void on_posted(void *arg)
{
    struct waiter *w = arg;
    waiter_wake(w);
    waiter_put(w);
}

/* Under mu: w is told, once. */
static void tell(struct waiter *w)
{
    if (w->notified)
        return;
    w->notified = true;
    w->refs++;
    loop_post(w->loop, on_posted, w);
}

void keywait_notify(int64_t user_id, const char *key, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (struct waiter *w = buckets[bucket_of(user_id, key)]; w != NULL; w = w->next)
        if (w->user_id == user_id && strcmp(w->key, key) == 0)
            tell(w);
    pthread_mutex_unlock(&mu);
}

void keywait_notify_all(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (int b = 0; b < KEYWAIT_BUCKETS; b++)
        for (struct waiter *w = buckets[b]; w != NULL; w = w->next)
            tell(w);
    pthread_mutex_unlock(&mu);
}

static struct waiter *waiter_add(int64_t user_id, const char *key)
{
    struct waiter *w = xcalloc(1, sizeof *w);
    w->user_id = user_id;
    snprintf(w->key, sizeof w->key, "%s", key);
    w->fiber = fiber_self();
    w->loop = loop_self();
    w->refs = 1;
    unsigned b = bucket_of(user_id, w->key);
    pthread_mutex_lock(&mu);
    w->next = buckets[b];
    if (w->next != NULL)
        w->next->prev = w;
    buckets[b] = w;
    pthread_mutex_unlock(&mu);
    return w;
}

static void waiter_remove(struct waiter *w)
{
    unsigned b = bucket_of(w->user_id, w->key);
    pthread_mutex_lock(&mu);
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        buckets[b] = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    pthread_mutex_unlock(&mu);
    waiter_put(w);
}

/* On a fiber: registered, then watching, then parked until told or until
 * the next look is due. A watch that fails (Redis) still parks until the
 * next look: looking again at once would only fail again. */
static void park_until_told(int64_t user_id, const char *key, const char *seen, int64_t left)
{
    struct waiter *w = waiter_add(user_id, key);
    int rc = keyevents_watch(user_id, key, seen);
    if (rc != TD_ECONFLICT) {
        pthread_mutex_lock(&mu);
        bool told = w->notified;
        pthread_mutex_unlock(&mu);
        if (!told) {
            /* Nothing held across the park: no database connection is
             * kept from the others while this request only waits. */
            store_fiber_idle();
            loop_timer_start(w->loop, &w->timer,
                             (int)(left < KEYWAIT_POLL_MS ? left : KEYWAIT_POLL_MS), on_timer, w);
            w->parked = true;
            fiber_park();
            /* The park may have returned at once, for a fiber_ready that
             * came while the fiber ran (fiber.h): then no wake-up of this
             * wait cleared the flag, and one still on its way (on_posted)
             * would ready the fiber in whatever it waits for next. */
            w->parked = false;
            loop_timer_stop(w->loop, &w->timer);
        }
    }
    waiter_remove(w);
}

bool keywait_for(struct keywait *kw, int64_t user_id, const char *key, const char *seen)
{
    int64_t left = kw->deadline_ms - mono_ms();
    if (kw->wait_s == 0 || left <= 0 || atomic_load(kw->draining))
        return false;
    if (!kw->waited) {
        kw->waited = true;
        metrics_inc(M_KEY_WAITS);
    }
    if (fiber_self() == NULL)
        fiber_sleep_ms(left < KEYWAIT_POLL_MS ? left : KEYWAIT_POLL_MS);
    else
        park_until_told(user_id, key, seen, left);
    return true;
}

void keywait_finish(const struct keywait *kw, enum keywait_end how)
{
    if (!kw->waited)
        return;
    switch (how) {
    case KEYWAIT_ANSWERED:
        metrics_inc(M_KEY_WAITS_ANSWERED);
        break;
    case KEYWAIT_RAN:
        metrics_inc(M_KEY_WAITS_RAN);
        break;
    case KEYWAIT_RAN_OUT:
        metrics_inc(M_KEY_WAITS_RAN_OUT);
        break;
    }
}
