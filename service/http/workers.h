/* workers.h - the pool of threads that do the blocking work of requests.
 *
 * A request that must wait for Redis or MySQL must not hold up the other
 * connections of the thread that read it. So the few HTTP threads only
 * parse, check and answer what needs no I/O; everything else is handed to
 * this pool: a bounded queue and a fixed set of threads, each with its own
 * Redis connection (thread-local, never shared) and a MySQL connection
 * borrowed from the database pool for each job (store_thread_idle gives it
 * back), so the worker count and the database connection count are
 * separate settings. Any free worker takes the next job, whichever
 * connection it came from.
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

/* Starts n threads with a queue of at most queue_max waiting jobs.
 * Returns a new pool, or NULL (logged). */
struct workers *workers_start(int n, int queue_max);

/* Queues a job. Returns false, without running it, when the queue is full
 * or the pool is stopping: the caller answers "overloaded" itself. */
bool workers_submit(struct workers *w, workers_job_fn fn, void *arg);

/* Jobs queued and not yet started. */
int workers_waiting(struct workers *w);

/* Stops the pool: running jobs finish, queued ones are run cancelled,
 * threads release their connections and are joined; frees w. NULL is
 * accepted. */
void workers_stop(struct workers *w);

#endif
