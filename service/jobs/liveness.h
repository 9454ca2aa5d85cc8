/* liveness.h - a serving process says it is alive, a job (job.h) that
 * runs beside the HTTP server, not with the background work: every third of
 * TICKETD_INSTANCE_TTL_MS it renews ticketd:instance:<id> in Redis (SET PX
 * TICKETD_INSTANCE_TTL_MS), and deletes it when it stops cleanly.
 *
 * Every request's in-flight marker and session lock carry the id of the
 * process that set them (idem.h). When a retry finds a marker whose
 * process no longer beats, nobody will complete or release it: the retry
 * takes it over (inflight_key.c) instead of answering REQUEST_IN_PROGRESS until
 * the marker's TTL. A missed beat never breaks a guarantee (a process
 * wrongly thought dead only lets a copy through to the unique index); it
 * only decides how soon a dead request's key is usable again. */
#ifndef TICKETD_LIVENESS_H
#define TICKETD_LIVENESS_H

#include "job.h"

/* Beats once in jobs_start, then on its thread; stopped, it deletes the
 * instance key, so stop it after the last request was answered. */
extern const struct job liveness_job;

#endif
