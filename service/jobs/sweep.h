/* sweep.h - the expiry sweep's background thread: every
 * TICKETD_SWEEP_INTERVAL_MS it cancels the orders left unpaid for
 * TICKETD_ORDER_TTL_S (lifecycle_sweep), giving their seats back.
 *
 * Any number of instances may sweep at once: each order is expired under
 * its own row lock by the same compare-and-set as a user's cancel, and an
 * order another transaction holds is left for the next pass. */
#ifndef TICKETD_SWEEP_H
#define TICKETD_SWEEP_H

struct app;
struct sweep;

/* Starts the thread; app is borrowed and must outlive it. Returns a new
 * handle, or NULL (logged). */
struct sweep *sweep_start(struct app *app);
/* Asks the thread to stop (it finishes the order in hand), joins it and
 * frees s. NULL is accepted. */
void sweep_stop(struct sweep *s);

#endif
