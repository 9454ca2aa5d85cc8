/* liveness.h - a serving process says it is alive: every third of
 * TICKETD_INSTANCE_TTL_MS it renews ticketd:instance:<id> in Redis (SET PX
 * TICKETD_INSTANCE_TTL_MS), and deletes it when it stops cleanly.
 *
 * Every request's in-flight marker and session lock carry the id of the
 * process that set them (idem.h). When a retry finds a marker whose
 * process no longer beats, nobody will complete or release it: the retry
 * takes it over (orders_redis.c) instead of answering REQUEST_IN_PROGRESS until
 * the marker's TTL. A missed beat never breaks a guarantee (a process
 * wrongly thought dead only lets a copy through to the unique index); it
 * only decides how soon a dead request's key is usable again. */
#ifndef TICKETD_LIVENESS_H
#define TICKETD_LIVENESS_H

struct app;
struct liveness;

/* Beats once, then starts the beating thread. app (and app->instance) are
 * borrowed and must outlive it. Returns a new handle, or NULL (logged). */
struct liveness *liveness_start(struct app *app);

/* Stops beating, deletes the instance key, joins and frees l. NULL is
 * accepted. Call after the last request was answered. */
void liveness_stop(struct liveness *l);

#endif
