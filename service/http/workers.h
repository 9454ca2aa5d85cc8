/* workers.h - the pool of threads that do the blocking work of requests.
 *
 * A request that must wait for Redis or MySQL must not hold up the other
 * connections of the thread that read it. So the few HTTP threads only
 * parse, check and answer what needs no I/O; everything else is handed to
 * this pool: a bounded queue and a fixed set of threads. What a thread
 * does with connections around its jobs is the hooks' (struct
 * workers_thread_hooks), which boot.c fills from the store and cache
 * ports: each thread has its own Redis connection (thread-local, never
 * shared) and borrows a MySQL connection from the database pool for each
 * job, so the worker count and the database connection count are separate
 * settings. Any free worker takes the next job, whichever connection it
 * came from. The pool itself knows no Redis or MySQL.
 *
 * Thread-safe. */
#ifndef TICKETD_WORKERS_H
#define TICKETD_WORKERS_H

#include <stdbool.h>

struct workers;

/* A job: run(arg) on a worker thread; cancelled = true when the pool
 * stopped before the job could start (the job must still finish up, e.g.
 * answer "unavailable"). */
typedef void (*workers_job_fn)(void *arg, bool cancelled);

/* What each worker thread runs around its jobs; a NULL member is skipped.
 * Called on the worker thread itself. */
struct workers_thread_hooks {
    void (*begin)(void);     /* once, before its first job */
    void (*after_job)(void); /* after every job, e.g. a borrowed connection back */
    void (*end)(void);       /* once, before the thread ends: what it owned */
};

/* Starts n threads with a queue of at most queue_max waiting jobs; hooks
 * (borrowed, may be NULL) must outlive the pool. Returns a new pool, or
 * NULL (logged). */
struct workers *workers_start(int n, int queue_max, const struct workers_thread_hooks *hooks);

/* Queues a job. Returns false, without running it, when the queue is full
 * or the pool is stopping: the caller answers "overloaded" itself. */
bool workers_submit(struct workers *w, workers_job_fn fn, void *arg);

/* Jobs queued and not yet started. */
int workers_waiting(struct workers *w);

/* Stops the pool: running jobs finish, queued ones are run cancelled,
 * threads run their end hook and are joined; frees w. NULL is
 * accepted. */
void workers_stop(struct workers *w);

#endif
