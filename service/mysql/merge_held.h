/* merge_held.h - the sessions whose row another transaction holds past
 * the lock wait (store_merge.h): their orders stay out of batches, where
 * their wait would hold every other order of the batch; one at a time goes
 * alone, as the probe, and the others are answered 503 at once, until one
 * meets the row free. Thread-safe (atomics only). */
#ifndef TICKETD_MERGE_HELD_H
#define TICKETD_MERGE_HELD_H

#include <stdbool.h>
#include <stdint.h>

struct merge_held;

/* session's mark, or NULL when its row is not known to be held. */
struct merge_held *merge_held_find(int64_t session);

/* Notes that session's row was held past the bound (nothing when it is
 * noted already, or the table is full). */
void merge_held_note(int64_t session);

/* An order of session met the row free (anything but another lock wait):
 * the mark ends. */
void merge_held_forget(int64_t session);

/* Whether the caller becomes h's probe (no other order of its session is
 * being tried alone); each yes is ended by merge_held_probed. */
bool merge_held_probe(struct merge_held *h);
void merge_held_probed(struct merge_held *h);

#endif
