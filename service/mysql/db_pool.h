/* db_pool.h - a loop's request connections, lent to its fibers.
 *
 * A pool holds at most size items (db.c's connections, opaque here). A
 * fiber borrows one for the length of a request and gives it back; the
 * idle ones are a stack, so the item used last (a warm connection, its
 * statements prepared) is the next one lent. A fiber that finds all of them
 * lent waits in a queue, first come first served, and is handed the next
 * one given back, for at most the caller's timeout. No lock: a pool belongs
 * to one loop and is touched only on its thread, and no lock could be held
 * across the wait anyway (fiber.h). */
#ifndef TICKETD_DB_POOL_H
#define TICKETD_DB_POOL_H

#include "loop.h"

#include <stdbool.h>

struct db_pool_waiter;

struct db_pool {
    struct loop *loop;
    void **idle; /* size slots */
    int nidle;
    int lent;
    int size;
    struct db_pool_waiter *head, *tail;
};

/* The share of total connections of loop index out of loops: an even
 * split, the first loops taking the remainder, at least one each. */
int db_pool_share(int total, int loops, int index);

/* Makes p the pool of size >= 1 items of loop l. */
void db_pool_init(struct db_pool *p, struct loop *l, int size);

/* Frees p's idle items with destroy (which must accept each one) and p's
 * own memory; what is lent is the borrowers'. */
void db_pool_cleanup(struct db_pool *p, void (*destroy)(void *item));

/* On a fiber of p's loop: lends an item. Returns an idle one; or NULL with
 * *make set when the pool has room for one more (the caller makes it, and
 * it counts as lent); or parks the fiber until an item is given back
 * (returned) or timeout_ms passes (NULL, *make false). */
void *db_pool_borrow(struct db_pool *p, int timeout_ms, bool *make);

/* On p's loop thread: takes item back, handing it straight to the fiber
 * that has waited longest, if any. */
void db_pool_give_back(struct db_pool *p, void *item);

/* Fibers waiting for an item. */
int db_pool_waiting(const struct db_pool *p);

#endif
