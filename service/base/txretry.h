/* txretry.h - running a database transaction again after a deadlock, a
 * lock wait timeout or a Galera certification conflict (TD_ERETRY), a
 * bounded number of times, with full jitter over a doubling window so that
 * the transactions that collided do not collide again in step. On a
 * fiber the pause between attempts parks the fiber on a loop timer (the
 * loop serves other requests meanwhile); on a plain thread it sleeps.
 * Thread-safe. */
#ifndef TICKETD_TXRETRY_H
#define TICKETD_TXRETRY_H

#include <stdint.h>

/* Why an attempt answered TD_ERETRY, for the retries metric
 * (ticketd_transaction_retries_total{cause=...}). The database adapter
 * notes it where it maps the server's error; an attempt that returns
 * TD_ERETRY for a reason of its own (a random order number that collided)
 * leaves TXRETRY_OTHER. */
enum txretry_cause {
    TXRETRY_OTHER,
    TXRETRY_DEADLOCK,      /* 1213 at a statement: InnoDB chose this transaction as victim */
    TXRETRY_LOCK_WAIT,     /* 1205: a row lock was not granted in time */
    TXRETRY_CERTIFICATION, /* 1213 at COMMIT: a Galera node certified a conflicting write first */
};

/* Notes the cause of the TD_ERETRY the caller is about to return
 * (fiber-local on a fiber, thread-local elsewhere: fiber.h's slot;
 * txretry_run clears it before each attempt). */
void txretry_note(enum txretry_cause cause);
/* The cause the caller noted last: a merged batch's fiber hands it to
 * every order of the batch (store_merge.h). */
enum txretry_cause txretry_noted(void);

/* Calls fn(ctx) until it returns anything but TD_ERETRY, at most
 * 1 + retries times, sleeping 1-2 ms, then up to 4, 8, ... 128 ms between
 * attempts and counting each retry by the cause the failed attempt noted.
 * Returns fn's last answer (TD_ERETRY when every attempt collided). */
int txretry_run(int retries, int (*fn)(void *ctx), void *ctx);

#endif
