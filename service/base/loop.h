/* loop.h - the event loop a loop thread runs: one epoll set of file
 * events, a heap of timers, a queue of tasks due in this turn (fibers that
 * may run again, fiber.h), hooks run at the end of a turn, and a thread-safe
 * post from other threads (an eventfd wakes the loop).
 *
 * One turn: wait for events (no longer than the nearest timer, not at all
 * when a task is due), serve every ready file event and due timer, run the
 * due tasks until none is left, then the turn-end hooks (which may make
 * more tasks due: those run before the loop sleeps). The turn-end hook is
 * the batching point: whatever the turn's requests queued goes out in one
 * write there, and an idle loop adds no wait.
 *
 * TICKETD_LOOPS loop threads run one loop each (http/http.c); everything a
 * loop owns (its io watchers, timers, hooks, tasks) is touched only on its
 * thread, except loop_post and loop_stop. The structs below are owned by the
 * caller, who keeps them alive while they are started or queued.
 *
 * The rule of a loop thread: nothing on it blocks. Every request of the
 * loop, its /livez included, waits for whatever the thread waits for, so
 * one blocking call is a stall of every connection the loop serves. On a
 * loop thread (its callbacks and its fibers) there is no blocking connect
 * or read, no name look-up (getaddrinfo), no sleep, and no wait for a lock
 * that another thread may hold across I/O; a mutex held for a few
 * instructions on both sides (loop_post's) is not such a wait. What must
 * wait parks its fiber on a file event or a timer (fiber.h); what cannot
 * be made to (the Sentinel query, a host name's look-up, the blocking
 * Redis and MySQL clients) runs on a thread of its own and hands its
 * result over without a lock the loop would wait on (an atomic pointer,
 * loop_post). The blocking helpers state it with LOOP_MUST_NOT_BLOCK: in
 * the test builds (TICKETD_FAULTS: the ASan and faults builds) reaching
 * one on a loop thread aborts the process, naming the helper, so a test
 * that drives the path fails loudly; in the release build it costs
 * nothing. */
#ifndef TICKETD_LOOP_H
#define TICKETD_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct loop;

#define LOOP_READ  1u
#define LOOP_WRITE 2u

/* ready: LOOP_READ and/or LOOP_WRITE; an error or hang-up on the fd is
 * reported as both, so whichever side the owner waits for finds it. */
typedef void loop_io_fn(void *arg, unsigned ready);

/* A file descriptor watched by a loop (level-triggered). Caller-owned. */
struct loop_io {
    int fd;
    unsigned want;
    loop_io_fn *fn;
    void *arg;
};

/* A one-shot timer. Caller-owned; zero it before first use. heap_at is
 * the loop's: 0 while not started, so that a zeroed timer is stopped. */
struct loop_timer {
    int64_t due_ms;
    void (*fn)(void *arg);
    void *arg;
    int heap_at;
};

/* A task due in the current turn (loop_soon) or at its end
 * (loop_at_turn_end). Caller-owned; zero it before first use. */
struct loop_task {
    void (*fn)(void *arg);
    void *arg;
    struct loop_task *next;
    bool queued;
};

/* The loop this thread runs, or NULL. */
struct loop *loop_self(void);

/* 0 .. TICKETD_LOOPS-1 */
int loop_index(const struct loop *l);

/* l's own element of an array of n elements of size bytes, one per loop,
 * indexed by loop_index; NULL when l's index is beyond n. For the state a
 * module keeps per loop (its queue, its connection), touched only on that
 * loop's thread. */
void *loop_slot(const struct loop *l, void *array, int n, size_t size);

/* The number of loops of the service (loop_new's count), 0 before any. */
int loop_count(void);

/* Watches fd for want (LOOP_READ | LOOP_WRITE, or 0 to keep it quiet
 * while staying registered). fn(arg, ready) runs on l's thread. */
void loop_io_start(struct loop *l, struct loop_io *io, int fd, unsigned want, loop_io_fn *fn,
                   void *arg);
void loop_io_change(struct loop *l, struct loop_io *io, unsigned want);
/* Stops watching; call before closing the fd. */
void loop_io_stop(struct loop *l, struct loop_io *io);

/* Runs fn(arg) once, ms from now (0: in the next turn, without sleeping).
 * Starting a started timer moves it. */
void loop_timer_start(struct loop *l, struct loop_timer *t, int ms, void (*fn)(void *), void *arg);
/* Stopping a timer that is not started does nothing. */
void loop_timer_stop(struct loop *l, struct loop_timer *t);

/* Runs t->fn(t->arg) once at the end of the current turn, after every
 * ready event and runnable fiber was served and before the loop sleeps:
 * the batching point (orders of one turn go to Redis in one write and to
 * MariaDB as one batch). Queuing a queued task does nothing. */
void loop_at_turn_end(struct loop *l, struct loop_task *t, void (*fn)(void *), void *arg);

/* Runs t->fn(t->arg) in the current turn, after the events at hand and
 * before the turn-end hooks; on l's thread only. Queuing a queued task
 * does nothing. fiber_ready is built on it. */
void loop_soon(struct loop *l, struct loop_task *t, void (*fn)(void *), void *arg);

/* Thread-safe: runs fn(arg) on loop l's thread soon (eventfd wake-up).
 * Aborts when out of memory, like every allocation here. */
void loop_post(struct loop *l, void (*fn)(void *), void *arg);

/* Makes loop number index of a service of count loops (the same count for
 * each). Returns NULL (logged) when the kernel refuses an epoll set or an
 * eventfd. New: loop_free. */
struct loop *loop_new(int index, int count);

/* Runs l's turns on the calling thread until loop_stop; the thread is l's
 * thread meanwhile (loop_self). */
void loop_run(struct loop *l);

/* Thread-safe: loop_run returns after the turn at hand (a stop asked
 * before loop_run makes it return after one turn). */
void loop_stop(struct loop *l);

/* The loop must not run; whatever is still started or queued is forgotten. */
void loop_free(struct loop *l);

/* The clock timers use: CLOCK_MONOTONIC in milliseconds. */
int64_t loop_now_ms(void);

/* True on a thread while it runs a loop (loop_run): its callbacks and its
 * fibers. */
bool loop_on_loop_thread(void);

/* The rule above, checked: aborts, naming what (a blocking helper), when
 * the calling thread runs a loop. Through LOOP_MUST_NOT_BLOCK. */
void loop_forbid_blocking(const char *what);

/* Sleeps the calling thread ms milliseconds (restarts after signals): a
 * blocking helper, for threads that run no loop (a fiber sleeps with
 * fiber_sleep_ms). */
void sleep_ms(int64_t ms);

#ifdef TICKETD_FAULTS
#define LOOP_MUST_NOT_BLOCK(what) loop_forbid_blocking(what)
#else
#define LOOP_MUST_NOT_BLOCK(what) ((void)0)
#endif

#endif
