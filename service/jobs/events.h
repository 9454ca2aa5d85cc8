/* events.h - the asynchronous half of ticketd: the outbox relay
 * (relay.h) and the stream consumers (consumers.h, one per group of
 * consume.h), each on its own thread. The expiry sweep, the other
 * background job, lives in sweep.h.
 *
 * `ticketd serve` runs them beside the HTTP server unless
 * TICKETD_WORKERS=0; `ticketd worker` runs only them. Any number of
 * processes may run them at once against one Redis and one database. */
#ifndef TICKETD_EVENTS_H
#define TICKETD_EVENTS_H

struct app;
struct events;

/* Starts the background threads. Returns a new handle, or NULL (logged). */
struct events *events_start(struct app *app);
/* Asks every thread to stop, joins them, frees e. NULL is accepted. */
void events_stop(struct events *e);

#endif
