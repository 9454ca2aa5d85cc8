/* db_pool.c - a loop's request connections, lent to its fibers (db_pool.h). */
#include "db_pool.h"

#include "fiber.h"
#include "util.h"

#include <stdlib.h>

/* A fiber waiting for an item, on its own stack. */
struct db_pool_waiter {
    struct db_pool *pool;
    struct fiber *fiber;
    void *given; /* NULL when the wait timed out */
    bool done;
    struct loop_timer timer;
    struct db_pool_waiter *next;
};

int db_pool_share(int total, int loops, int index)
{
    if (loops < 1)
        loops = 1;
    int n = total / loops + (index < total % loops ? 1 : 0);
    return n < 1 ? 1 : n;
}

void db_pool_init(struct db_pool *p, struct loop *l, int size)
{
    *p = (struct db_pool){.loop = l, .size = size < 1 ? 1 : size};
    p->idle = xcalloc((size_t)p->size, sizeof *p->idle);
}

void db_pool_cleanup(struct db_pool *p, void (*destroy)(void *item))
{
    for (int i = 0; i < p->nidle; i++)
        destroy(p->idle[i]);
    free(p->idle);
    *p = (struct db_pool){0};
}

static void unlink_waiter(struct db_pool *p, struct db_pool_waiter *w)
{
    struct db_pool_waiter *prev = NULL;
    for (struct db_pool_waiter *at = p->head; at != NULL; prev = at, at = at->next) {
        if (at != w)
            continue;
        if (prev != NULL)
            prev->next = w->next;
        else
            p->head = w->next;
        if (p->tail == w)
            p->tail = prev;
        return;
    }
}

static void timed_out(void *arg)
{
    struct db_pool_waiter *w = arg;
    unlink_waiter(w->pool, w);
    w->done = true;
    fiber_ready(w->fiber);
}

void *db_pool_borrow(struct db_pool *p, int timeout_ms, bool *make)
{
    *make = false;
    if (p->nidle > 0) {
        p->lent++;
        return p->idle[--p->nidle];
    }
    if (p->lent < p->size) {
        p->lent++;
        *make = true;
        return NULL;
    }
    struct db_pool_waiter w = {.pool = p, .fiber = fiber_self()};
    if (p->tail != NULL)
        p->tail->next = &w;
    else
        p->head = &w;
    p->tail = &w;
    loop_timer_start(p->loop, &w.timer, timeout_ms, timed_out, &w);
    while (!w.done) /* a wake-up meant for something else parks again */
        fiber_park();
    loop_timer_stop(p->loop, &w.timer);
    return w.given;
}

void db_pool_give_back(struct db_pool *p, void *item)
{
    struct db_pool_waiter *w = p->head;
    if (w == NULL) {
        p->idle[p->nidle++] = item;
        p->lent--;
        return;
    }
    /* Still lent: it goes from one borrower to the next. */
    p->head = w->next;
    if (p->head == NULL)
        p->tail = NULL;
    loop_timer_stop(p->loop, &w->timer);
    w->given = item;
    w->done = true;
    fiber_ready(w->fiber);
}

int db_pool_waiting(const struct db_pool *p)
{
    int n = 0;
    for (const struct db_pool_waiter *w = p->head; w != NULL; w = w->next)
        n++;
    return n;
}
