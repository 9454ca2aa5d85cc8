/* keywait_job.h - a serving process listens for the ends of the keys its
 * requests wait for (Prefer: wait, keywait.h): a job (job.h), beside the
 * HTTP server's loops, whose thread reads the key events (keyevents.h) of every
 * instance and hands each to the waiters of this process. While Redis
 * cannot be reached it tries again every half second; the waiters look at
 * their keys on their own meanwhile. */
#ifndef TICKETD_KEYWAIT_JOB_H
#define TICKETD_KEYWAIT_JOB_H

#include "job.h"

extern const struct job keywait_job;

#endif
