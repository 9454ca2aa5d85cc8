/* txretry.h - running a database transaction again after a deadlock or a
 * lock wait timeout (TD_ERETRY), a bounded number of times, with full
 * jitter over a doubling window so that the transactions that collided
 * do not collide again in step. Thread-safe. */
#ifndef TICKETD_TXRETRY_H
#define TICKETD_TXRETRY_H

/* Calls fn(ctx) until it returns anything but TD_ERETRY, at most
 * 1 + retries times, sleeping 1-2 ms, then up to 4, 8, ... 128 ms between
 * attempts and counting each retry in M_TX_RETRIES. Returns fn's last
 * answer (TD_ERETRY when every attempt collided). */
int txretry_run(int retries, int (*fn)(void *ctx), void *ctx);

#endif
