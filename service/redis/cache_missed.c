/* cache_missed.c - the ends of keys that Redis missed (cache_redis.h),
 * sent again once it answers.
 *
 * A request that took an Idempotency-Key's marker and its user+session
 * lock gives both back when it ends: its marker becomes the answer's
 * record (cache_key_complete) or goes (cache_key_release), and its lock
 * goes with it. When Redis is unreachable at that moment (the breaker
 * open, the link cut, the reply late) the end is lost, and the lock stays
 * until its TTL (TICKETD_LOCK_TTL_MS): every new order of that user and
 * session is refused 409 DUPLICATE_SUBMISSION although nothing of theirs
 * runs any more. So an end that could not reach Redis is kept here and
 * sent again:
 *   - first thing in the user's next begin (cache_missed_resend on the
 *     begin path, on the same connection, so Redis runs it before that
 *     begin): the user's next order after Redis is back finds the lock
 *     free; an end that cannot go holds that begin back (KEY_NOT_SENT);
 *   - and by a thread of its own every MISSED_RETRY_MS while any is kept,
 *     for the users who do not come back through this process (another
 *     instance's requests wait for these locks too).
 * Each end is a compare-and-delete (and compare-and-set) of what the
 * request itself held, so sending it twice, or after its lock expired and
 * another request took it, changes nothing that is not ours. An end is
 * kept until the longest of the marker's and the lock's TTLs has passed
 * (then Redis has dropped what it would give back), at most MISSED_MAX of
 * them; beyond, the TTL remains the bound. Thread-safe: the list is under
 * a mutex held for a few instructions, never across a call to Redis. */
#include "cache_redis.h"

#include "err.h"
#include "log.h"
#include "redis.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How often the thread tries again while ends are kept: the Redis
 * breaker's cooldown, so while Redis is down each try is refused at no
 * cost and the first that passes is the breaker's probe. */
#define MISSED_RETRY_MS 500
/* Ends kept at most: past that, the lock's TTL is the bound. */
#define MISSED_MAX 4096

struct missed {
    uint64_t id;
    struct cache_end end; /* every string owned */
    int64_t until_ms;     /* past this Redis has nothing left to give back */
    struct missed *next;
};

static int (*send_end)(const struct cache_end *e);
static int keep_ms;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct missed *head; /* under mu, oldest first */
static struct missed *tail; /* under mu */
static uint64_t next_id;    /* under mu */
static atomic_int kept;     /* how many are in the list: read without mu */

static bool thread_on;
static pthread_t thread;
static sem_t wake;
static atomic_bool stopping;

static char *dup_or_null(const char *s)
{
    return s != NULL ? xstrdup(s) : NULL;
}

static void end_copy(struct cache_end *to, const struct cache_end *from)
{
    *to = *from;
    to->key = dup_or_null(from->key);
    to->marker = dup_or_null(from->marker);
    to->record = dup_or_null(from->record);
    to->owner = dup_or_null(from->owner);
}

static void end_free(struct cache_end *e)
{
    free((char *)e->key);
    free((char *)e->marker);
    free((char *)e->record);
    free((char *)e->owner);
}

static void missed_free(struct missed *m)
{
    end_free(&m->end);
    free(m);
}

/* Takes out (under mu) the ends whose time is over. */
static void drop_expired_locked(int64_t now)
{
    struct missed **pp = &head;
    tail = NULL;
    while (*pp != NULL) {
        struct missed *m = *pp;
        if (m->until_ms <= now) {
            *pp = m->next;
            missed_free(m);
            atomic_fetch_sub(&kept, 1);
            continue;
        }
        tail = m;
        pp = &m->next;
    }
}

void cache_missed_keep(const struct cache_end *e)
{
    int64_t now = mono_ms();
    struct missed *m = xcalloc(1, sizeof *m);
    end_copy(&m->end, e);
    m->until_ms = now + keep_ms;
    pthread_mutex_lock(&mu);
    drop_expired_locked(now);
    bool full = atomic_load(&kept) >= MISSED_MAX;
    if (!full) {
        m->id = ++next_id;
        if (tail != NULL)
            tail->next = m;
        else
            head = m;
        tail = m;
        atomic_fetch_add(&kept, 1);
    }
    pthread_mutex_unlock(&mu);
    if (full) {
        log_warn("redis: %d key ends wait for Redis already; user %lld's is left to its TTL",
                 MISSED_MAX, (long long)e->user_id);
        missed_free(m);
        return;
    }
    if (thread_on)
        sem_post(&wake);
}

/* Copies (under mu) the ends of user_id (every user: user_id 0) into a
 * new array of *n, for sending without the lock. */
static struct missed *snapshot(int64_t user_id, int *n)
{
    pthread_mutex_lock(&mu);
    drop_expired_locked(mono_ms());
    int count = 0;
    for (struct missed *m = head; m != NULL; m = m->next)
        count += user_id == 0 || m->end.user_id == user_id;
    struct missed *copy = count > 0 ? xcalloc((size_t)count, sizeof *copy) : NULL;
    int i = 0;
    for (struct missed *m = head; m != NULL && i < count; m = m->next) {
        if (user_id != 0 && m->end.user_id != user_id)
            continue;
        copy[i].id = m->id;
        end_copy(&copy[i].end, &m->end);
        i++;
    }
    pthread_mutex_unlock(&mu);
    *n = count;
    return copy;
}

/* Takes the end numbered id out of the list, when it is still there (a
 * sender beside this one may have taken it first). */
static void forget(uint64_t id)
{
    struct missed *gone = NULL;
    pthread_mutex_lock(&mu);
    for (struct missed **pp = &head; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->id != id)
            continue;
        gone = *pp;
        *pp = gone->next;
        atomic_fetch_sub(&kept, 1);
        break;
    }
    tail = NULL;
    for (struct missed *m = head; m != NULL; m = m->next)
        tail = m;
    pthread_mutex_unlock(&mu);
    if (gone != NULL)
        missed_free(gone);
}

/* Sends the ends of user_id (0: all) in order; each one Redis took is
 * forgotten. Stops at the first that cannot reach Redis: it is down
 * still, and the rest would only be refused. True when every end of the
 * snapshot went. */
static bool resend(int64_t user_id)
{
    int n;
    struct missed *copy = snapshot(user_id, &n);
    int i = 0;
    for (; i < n; i++) {
        int rc = send_end(&copy[i].end);
        if (rc == TD_EUNAVAIL)
            break;
        forget(copy[i].id); /* sent (or refused for good: an error reply is a bug, logged) */
    }
    if (n > 0 && i == n)
        log_info("redis: %d key end(s) Redis had missed were sent again", n);
    for (int j = 0; j < n; j++)
        end_free(&copy[j].end);
    free(copy);
    return i == n;
}

bool cache_missed_resend(int64_t user_id)
{
    if (atomic_load(&kept) == 0)
        return true; /* the usual case, at the cost of one load */
    return resend(user_id);
}

static void wait_wake(int ms)
{
    if (ms < 0) {
        while (sem_wait(&wake) != 0 && errno == EINTR)
            ;
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000;
    ts.tv_sec += ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    while (sem_timedwait(&wake, &ts) != 0 && errno == EINTR)
        ;
}

/* The thread: asleep while nothing is kept; else tries every
 * MISSED_RETRY_MS until the list is empty. */
static void *missed_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&stopping)) {
        if (atomic_load(&kept) == 0) {
            wait_wake(-1);
            continue;
        }
        wait_wake(MISSED_RETRY_MS);
        if (!atomic_load(&stopping))
            resend(0);
    }
    redis_thread_release();
    return NULL;
}

int cache_missed_init(const struct config *cfg, int (*send)(const struct cache_end *e))
{
    send_end = send;
    keep_ms = cfg->lock_ttl_ms > cfg->inflight_ttl_ms ? cfg->lock_ttl_ms : cfg->inflight_ttl_ms;
    atomic_store(&stopping, false);
    if (sem_init(&wake, 0, 0) != 0)
        return TD_EINTERNAL;
    if (pthread_create(&thread, NULL, missed_main, NULL) != 0) {
        log_error("redis: cannot start the thread that sends missed key ends");
        sem_destroy(&wake);
        return TD_EINTERNAL;
    }
    thread_on = true;
    return TD_OK;
}

void cache_missed_cleanup(void)
{
    if (thread_on) {
        atomic_store(&stopping, true);
        sem_post(&wake);
        pthread_join(thread, NULL);
        sem_destroy(&wake);
        thread_on = false;
    }
    pthread_mutex_lock(&mu);
    while (head != NULL) {
        struct missed *m = head;
        head = m->next;
        missed_free(m);
    }
    tail = NULL;
    atomic_store(&kept, 0);
    pthread_mutex_unlock(&mu);
}
