/* sweep.h - the expiry sweep, a background job (job.h): every
 * TICKETD_SWEEP_INTERVAL_MS it cancels the orders left unpaid for
 * TICKETD_ORDER_TTL_S (lifecycle_sweep), giving their seats back. Asked to
 * stop, it finishes the order in hand.
 *
 * Any number of instances may sweep at once: each order is expired under
 * its own row lock by the same compare-and-set as a user's cancel, and an
 * order another transaction holds is left for the next pass. */
#ifndef TICKETD_SWEEP_H
#define TICKETD_SWEEP_H

#include "job.h"

extern const struct job sweep_job;

#endif
