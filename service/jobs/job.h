/* job.h - the shape every background job shares, and the runner that
 * gives each one its thread. A job (the outbox relay, the stream
 * consumers, the expiry sweep, the retention job, the order-key filter's
 * builds, the liveness beat) is a table entry: its name, the connections
 * it uses, its state and one round of its work (the tick). The runner
 * owns the rest: the thread, the wait between rounds, the stop, and the
 * connections a job's thread leaves behind, which it gives back through
 * hooks boot.c fills from the store and cache ports, so that no job
 * borrows or releases a connection itself.
 *
 * Start and stop a set from one thread. */
#ifndef TICKETD_JOB_H
#define TICKETD_JOB_H

#include "stopper.h"

#include <stdbool.h>
#include <stddef.h>

struct app;

/* The connections a job's thread uses, released when it ends. */
enum job_needs {
    JOB_STORE = 1, /* MySQL */
    JOB_CACHE = 2, /* Redis: the cache and the stream */
};

/* What a job's functions get: on its own thread but for open (and a
 * tick_before_start job's first tick), on the thread that starts it. */
struct job_ctx {
    const char *name; /* the job's */
    struct app *app;  /* borrowed; outlives the job */
    void *state;      /* the job's own, state_size bytes, zeroed */
    int index;        /* which of the job's instances, from 0 */
    /* The thread's: a long tick checks stopper_stopped(). NULL in open and
     * in a tick_before_start job's first tick, before there is a thread. */
    struct stopper *stopper;
    bool failing; /* job_note's: the last round failed */
};

struct job {
    const char *name;  /* for the logs: "expiry sweep" */
    unsigned needs;    /* enum job_needs bits */
    size_t state_size; /* 0: no state */
    /* How many instances app runs, each on a thread of its own (a
     * consumer per group). NULL: one; 0: the job is off. */
    int (*instances)(const struct app *app);
    /* Sets the state up and says what the job will do (NULL: nothing). */
    void (*open)(struct job_ctx *c);
    /* One round. Returns how long to wait before the next, in ms (0: at
     * once); the wait ends early when the job is asked to stop. */
    int (*tick)(struct job_ctx *c);
    /* After the last tick, on the job's thread, before its connections
     * are released (NULL: nothing). */
    void (*finish)(struct job_ctx *c);
    /* The first tick runs in jobs_start, before the thread: it has been
     * done once by the time jobs_start returns (the liveness beat, before
     * any request). */
    bool tick_before_start;
};

/* How the runner gives back what a job's thread owns of the ports when it
 * ends (and the starting thread's, after a tick_before_start tick); a NULL
 * member is skipped. */
struct job_hooks {
    void (*store_release)(void);
    void (*cache_release)(void);
};

struct jobs;

/* Starts every instance of the n jobs of table, in order; table, app and
 * hooks (NULL: none) are borrowed and must outlive the set. Returns a new set, or NULL
 * (logged) after stopping what had started. */
struct jobs *jobs_start(struct app *app, const struct job *const *table, size_t n,
                        const struct job_hooks *hooks);

/* Asks every thread of js to stop first, so that their waits and blocking
 * reads end together, then joins them in order and frees js. NULL is
 * accepted. */
void jobs_stop(struct jobs *js);

/* For a tick's outcome: one line when the job starts failing (rc not
 * TD_OK), naming retry_ms, and one when it is back, not one per round
 * while the database is away. */
void job_note(struct job_ctx *c, int rc, int retry_ms);

#endif
