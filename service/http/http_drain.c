/* http_drain.c - the end of the server: the listeners closed without
 * resetting what waits in their accept queues (http_quiesce), the
 * requests read answered and the connections left idle (http_drain), the
 * loops ended and everything freed (http_stop). The daemons' start is
 * http.c's. */
#include "http.h"

#include "app.h"
#include "faults.h"
#include "http_internal.h"
#include "log.h"
#include "loop.h"
#include "util.h"

#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

/* A connection that holds no request, has nothing unread and has been
 * quiet this long since it was opened or last answered is idle: its
 * client sends nothing, so closing it cuts off no answer (RFC 9112 9.3.1:
 * clients retry requests on a closed idle one). The drain judges each
 * connection by it (http_conns_unsettled). */
#define DRAIN_IDLE_GRACE_MS 500

/* Runs fn(hl) on each loop's thread and returns once every one has. */
struct on_each {
    struct http_loop *hl;
    void (*fn)(struct http_loop *hl);
    sem_t done;
};

static void on_each_run(void *arg)
{
    struct on_each *e = arg;
    e->fn(e->hl);
    sem_post(&e->done);
}

static void for_each_loop(struct http_server *s, void (*fn)(struct http_loop *hl))
{
    for (int i = 0; i < s->nloops; i++) {
        struct http_loop *hl = &s->loops[i];
        if (!hl->thread_started)
            continue;
        struct on_each e = {.hl = hl, .fn = fn};
        sem_init(&e.done, 0, 0);
        loop_post(hl->loop, on_each_run, &e);
        while (sem_wait(&e.done) != 0)
            ; /* EINTR */
        sem_destroy(&e.done);
    }
}

/* ---- the drain ----
 *
 * Each loop's daemon has a listening socket of its own (SO_REUSEPORT),
 * with its own accept queue, and Linux resets every connection still in
 * that queue when the socket is closed: clients whose handshake the kernel
 * completed, and who sent their request, while the process was too busy
 * (or stopped) to accept them. So the drain takes each socket back from
 * its daemon (MHD_quiesce_daemon: MHD accepts no more), accepts on the
 * loop's thread whatever waits in the queue and hands it to the daemon
 * (MHD_add_connection), and closes the socket only when nothing more can
 * land in the queue. Every request on those connections is served like
 * any other, its answer saying Connection: close.
 *
 * An empty queue alone is not enough: a handshake the kernel completes
 * between the accept() that finds it empty and the close() lands in it
 * and is reset, and under live load, clients reconnecting after each
 * answer, that instant is hit. So new handshakes are refused first
 * (http_listener.c: their SYNs dropped; the client sends its SYN again a
 * second later, finds the port closed and is refused, having sent
 * nothing), those already begun are let complete, and the socket is
 * closed after an accept() that follows the kernel's word that none is
 * half done on the port. A handshake half done for longer than
 * DRAIN_HANDSHAKE_WAIT_MS (its client gone, or another process's on a
 * shared port) is not waited for. */

/* How long the drain waits for handshakes begun before the filter; a
 * handshake completes in one round trip, and a lost final ACK is answered
 * by the server's SYN-ACK sent again at one second. */
#define DRAIN_HANDSHAKE_WAIT_MS 1500

/* How often it looks again while some are half done. */
#define DRAIN_HANDSHAKE_LOOK_MS 5

static void close_listener(struct http_loop *hl)
{
    if (hl->listen_fd < 0)
        return;
    loop_timer_stop(hl->loop, &hl->listen_timer);
    loop_io_stop(hl->loop, &hl->listen_io);
    close(hl->listen_fd);
    hl->listen_fd = -1;
    atomic_store(&hl->listener_closed, true);
}

/* The test build's fault point holds the close itself (not the accepts
 * before it), the instant a refused handshake must not get through. */
static void close_when_released(void *arg)
{
    struct http_loop *hl = arg;
    if (faults_held("http.drain_listener_close")) {
        loop_io_change(hl->loop, &hl->listen_io, 0);
        loop_timer_start(hl->loop, &hl->listen_timer, 10, close_when_released, hl);
        return;
    }
    close_listener(hl);
}

/* The accept queue was found empty. True when nothing more can land in
 * it once a last accept() finds it empty again: new handshakes are
 * refused and none is half done on the port (or past waiting for). */
static bool handshakes_done(struct http_loop *hl)
{
    if (!hl->refusing)
        return true; /* the kernel refused the filter: as good as it gets */
    int half = http_listener_half_open(hl->listen_fd);
    if (half == 0)
        return true;
    if (half < 0) {
        log_warn("http: loop %d cannot learn whether handshakes are half done on its listener "
                 "(sock_diag); closing it",
                 hl->index);
        return true;
    }
    if (mono_ms() >= hl->half_open_until_ms) {
        log_warn("http: loop %d closes its listener with %d handshakes still half done on its "
                 "port after %d ms; their clients, if any are its own, are reset",
                 hl->index, half, DRAIN_HANDSHAKE_WAIT_MS);
        return true;
    }
    return false;
}

static void listener_look_again(void *arg);

/* On hl's thread: accepts what waits in the queue, as long as the daemon
 * is below its limit (at the limit, the socket is left alone until a
 * connection closes: http_on_connection watches it again), and closes
 * the socket once handshakes_done. */
static void accept_queued(struct http_loop *hl)
{
    bool added = false, last_pass = false;
    while (hl->listen_fd >= 0) {
        if (atomic_load(&hl->connections) >= hl->conn_limit) {
            loop_io_change(hl->loop, &hl->listen_io, 0);
            break;
        }
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(hl->listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (last_pass) {
                    close_when_released(hl); /* nothing waits, nothing can come */
                } else if (handshakes_done(hl)) {
                    /* One pass more: a handshake that completed after
                     * the accept() above and before the kernel's count
                     * is in the queue. */
                    last_pass = true;
                    continue;
                } else {
                    loop_timer_start(hl->loop, &hl->listen_timer, DRAIN_HANDSHAKE_LOOK_MS,
                                     listener_look_again, hl);
                }
                break;
            }
            /* Out of descriptors or buffers: the queue keeps the rest
             * until a connection closes and gives one back. */
            log_warn("http: loop %d cannot accept a queued connection while draining: %s",
                     hl->index, strerror(errno));
            loop_io_change(hl->loop, &hl->listen_io, 0);
            break;
        }
        /* On failure MHD closes fd itself (and says why, on_mhd_log). */
        if (MHD_add_connection(hl->daemon, fd, (struct sockaddr *)&ss, len) == MHD_YES)
            added = true;
    }
    /* The daemon serves a connection added to it in its next run. */
    if (added)
        http_mhd_run_soon(hl);
}

static void listener_look_again(void *arg)
{
    accept_queued(arg);
}

static void listener_ready(void *arg, unsigned ready)
{
    (void)ready;
    accept_queued(arg);
}

/* On the loop's thread: MHD_run may be under way nowhere else. */
static void quiesce_daemon(struct http_loop *hl)
{
    MHD_socket fd = MHD_quiesce_daemon(hl->daemon);
    if (fd == MHD_INVALID_SOCKET) {
        atomic_store(&hl->listener_closed, true);
        return;
    }
    hl->listen_fd = fd;
    hl->refusing = http_listener_refuse_handshakes(fd);
    if (!hl->refusing)
        log_warn("http: loop %d cannot refuse new handshakes on its listener (%s); one that "
                 "completes as it is closed is reset",
                 hl->index, strerror(errno));
    hl->half_open_until_ms = mono_ms() + DRAIN_HANDSHAKE_WAIT_MS;
    loop_io_start(hl->loop, &hl->listen_io, fd, LOOP_READ, listener_ready, hl);
    accept_queued(hl);
}

void http_quiesce(struct http_server *s)
{
    for_each_loop(s, quiesce_daemon);
}

/* Waits until done(s) or the deadline; returns done(s). */
static bool wait_until(struct http_server *s, bool (*done)(struct http_server *), int64_t deadline)
{
    while (!done(s) && mono_ms() < deadline)
        sleep_ms(10);
    return done(s);
}

static bool listeners_closed(struct http_server *s)
{
    for (int i = 0; i < s->nloops; i++) {
        if (s->loops[i].thread_started && !atomic_load(&s->loops[i].listener_closed))
            return false;
    }
    return true;
}

/* On the loop's thread: how many of its connections the drain must still
 * wait for (http_conns_unsettled). */
static void count_unsettled(struct http_loop *hl)
{
    atomic_store(&hl->unsettled, http_conns_unsettled(hl, DRAIN_IDLE_GRACE_MS));
}

/* Every connection has closed, or those left are idle: no request in
 * hand, nothing unread, and quiet for DRAIN_IDLE_GRACE_MS since it was
 * opened or last answered. Each loop looks at its own. */
static bool connections_settled(struct http_server *s)
{
    if (atomic_load(&s->connections) == 0)
        return true;
    if (atomic_load(&s->inflight) != 0)
        return false;
    for_each_loop(s, count_unsettled);
    for (int i = 0; i < s->nloops; i++) {
        if (atomic_load(&s->loops[i].unsettled) != 0)
            return false;
    }
    return true;
}

static bool nothing_in_flight(struct http_server *s)
{
    return atomic_load(&s->inflight) == 0;
}

int http_drain(struct http_server *s, int timeout_ms)
{
    int64_t deadline = mono_ms() + timeout_ms;
    s->drain_deadline_ms = deadline;
    /* The queued connections are accepted first, then the listeners
     * closed (http_quiesce began it; a daemon at its limit goes on as its
     * connections close). */
    if (!wait_until(s, listeners_closed, deadline)) {
        log_error("http: the accept queues were not empty after %d ms; closing the listeners "
                  "resets what waits in them",
                  timeout_ms);
        for_each_loop(s, close_listener);
    }
    /* Every answer now says Connection: close, so each busy connection
     * ends after its next answer. A request counts as in flight from its
     * head until its answer's last byte is sent (the completed callback),
     * so waiting for the count answers every request that was read,
     * completely. */
    wait_until(s, connections_settled, deadline);
    /* What is left is idle. A request arriving on it from now on is
     * refused with 503 before it changes anything (http_on_request). */
    atomic_store(&s->stopping, true);
    wait_until(s, nothing_in_flight, deadline);
    return atomic_load(&s->inflight);
}

/* On the loop's thread, at the drain's deadline: the fibers still running
 * wait for Redis or MySQL past it. The loop ends without them; their
 * clients get no answer, which the exit status says (boot.c). */
static void stop_at_deadline(void *arg)
{
    struct http_loop *hl = arg;
    log_error("http: loop %d stops with %d requests still at Redis or MySQL past the drain "
              "deadline",
              hl->index, hl->fibers);
    loop_stop(hl->loop);
}

/* On the loop's thread: the loop ends once its last request fiber has
 * (each resumes its connection with the answer first), or at the drain's
 * deadline, whichever comes first. */
static void stop_when_idle(void *arg)
{
    struct http_loop *hl = arg;
    hl->stop_when_idle = true;
    close_listener(hl);
    if (hl->fibers == 0) {
        loop_stop(hl->loop);
        return;
    }
    int64_t deadline = hl->srv->drain_deadline_ms;
    if (deadline == 0)
        deadline = mono_ms() + (int64_t)hl->srv->app->cfg->drain_timeout_s * 1000;
    int64_t left = deadline - mono_ms();
    loop_timer_start(hl->loop, &hl->stop_timer, left > 0 ? (int)left : 0, stop_at_deadline, hl);
}

int http_stop(struct http_server *s)
{
    if (s == NULL)
        return 0;
    for (int i = 0; i < s->nloops; i++) {
        if (s->loops[i].thread_started)
            loop_post(s->loops[i].loop, stop_when_idle, &s->loops[i]);
    }
    int abandoned = 0;
    for (int i = 0; i < s->nloops; i++) {
        struct http_loop *hl = &s->loops[i];
        if (hl->thread_started)
            pthread_join(hl->thread, NULL);
        abandoned += hl->fibers;
    }
    /* A loop that ended at the deadline with fibers still parked: they
     * hold its exchanges, its connections and its MySQL and Redis links,
     * and nothing will run them again. All is left to the exit. */
    if (abandoned > 0)
        return abandoned;
    /* The loops have ended: their daemons are stopped from here, which
     * closes what connections are left (their completed callbacks run on
     * this thread). */
    for (int i = 0; i < s->nloops; i++) {
        struct http_loop *hl = &s->loops[i];
        if (hl->daemon != NULL)
            MHD_stop_daemon(hl->daemon);
        loop_free(hl->loop);
    }
    free(s->loops);
    http_conns_cleanup(s);
    free(s);
    return 0;
}
