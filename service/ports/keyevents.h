/* keyevents.h - the port a waiting copy of a request uses to learn that
 * its key's first copy has ended, on whichever instance it ran
 * (keywait.h): a look at the key that also asks to be told, and a
 * listener that hears the tellings.
 *
 * A waiter first watches the key: when the key still holds the record it
 * saw (the first copy's in-flight marker), the adapter notes that the key
 * has waiters, and the step that completes or releases the key announces
 * it. The look and the note are one atomic step, so an announcement is
 * either made after it or the look already saw the change: none falls in
 * between. The listener, on a thread of its own, hears every instance's
 * announcements. Announcements may still be lost (a dropped listener
 * connection, a Redis restart, a marker that expired instead of being
 * released): waiters look again now and then (keywait.c). */
#ifndef TICKETD_KEYEVENTS_H
#define TICKETD_KEYEVENTS_H

#include <stdint.h>

/* The user's key (an order key, or a cart's key in Redis, "batch/<key>")
 * still holds seen, a marker: TD_OK, and its end is announced (the
 * marker's TTL is the note's: a marker that expires unended is the case
 * the waiters' own looks cover). TD_ECONFLICT: it holds something else
 * now (or nothing). Other errors: Redis failed. */
int keyevents_watch(int64_t user_id, const char *key, const char *seen);

/* An announcement: the user's key has ended (completed or released). */
typedef void keyevents_fn(int64_t user_id, const char *key, void *arg);
/* The listener (re)connected: whatever was announced meanwhile is lost. */
typedef void keyevents_resync_fn(void *arg);

/* Listens for up to timeout_ms and calls on_key for each announcement
 * heard; (re)connects first when needed, then calls on_resync. TD_OK, or
 * TD_EUNAVAIL when Redis cannot be reached (the caller tries again
 * later). One thread only: the connection is the listener's own. */
int keyevents_listen(int timeout_ms, keyevents_fn *on_key, keyevents_resync_fn *on_resync,
                     void *arg);

/* Closes the listener's connection (on the listener's thread). */
void keyevents_close(void);

#endif
