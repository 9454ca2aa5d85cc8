/* http_mhd.c - libmicrohttpd 0.9.75 driven by a loop (base/loop.h): each
 * loop's daemon is run, re-run and woken from here, and its connections
 * suspended and resumed. The rules, which every caller relies on:
 *
 * - The daemon has no thread of its own. MHD_USE_EPOLL without an
 *   internal polling thread keeps its sockets in an epoll set of its own,
 *   whose fd sits in the loop's set; the loop runs the daemon (MHD_run,
 *   which serves what is ready and returns) when that fd is readable.
 *
 * - The timer is armed from MHD_get_timeout after every run. Not every
 *   piece of work shows in the kernel's set: libmicrohttpd keeps a ready
 *   list of its own, and a connection with work left (an answer queued in
 *   this run and written by the next, a request whose handler is to be
 *   called again) lives there, not in the set. With MHD_USE_TURBO a new
 *   connection enters the set only once a read or write finds its socket
 *   dry, and a resumed one is put on the list. MHD_get_timeout says 0
 *   while that list holds anything, so a run whose timer is not re-armed
 *   could leave work that nothing wakes the loop for.
 *
 * - A resume needs a run in the same turn. libmicrohttpd 0.9.75 gives a
 *   daemon without its own thread no inter-thread channel: MHD_start_daemon
 *   drops MHD_USE_ITC, which MHD_ALLOW_SUSPEND_RESUME asks for, when there
 *   is no internal polling thread ("useless if we are using 'external'
 *   select", daemon.c). So MHD_resume_connection only marks the
 *   connection, and nothing wakes the loop: http_mhd_resume runs the
 *   daemon in this turn (http_mhd_run_soon). That run moves the connection
 *   back to the ready list and calls its handler, which queues the answer;
 *   the timeout of 0 then brings the run that writes it, in the same turn
 *   (mhd_drive runs again while that timeout is 0). The same holds
 *   for a connection handed to the daemon by MHD_add_connection (the
 *   drain, http_drain.c).
 *
 * - Nothing here may block the loop (loop.h): MHD_run serves only what is
 *   ready, the timer and the re-runs are the loop's, and every call is
 *   made on the loop's own thread, so MHD_run is never under way twice.
 *
 * A break of these would show as a late answer in the log (http_late.c),
 * with its phase and libmicrohttpd's suspended flag; none did in the runs
 * docs/speed.md records. */
#include "http_internal.h"

#include "loop.h"

#include <assert.h>
#include <limits.h>
#include <microhttpd.h>
#include <stdatomic.h>

/* How many times one turn runs the daemon while it has work due at once
 * (mhd_drive). */
#define MHD_RUNS_PER_TURN 4

static void mhd_drive(void *arg);

/* Arms the timer for what MHD_get_timeout said: a timeout of ms (has), or
 * none. */
static void mhd_set_timer(struct http_loop *hl, bool has, MHD_UNSIGNED_LONG_LONG ms)
{
    if (has)
        loop_timer_start(hl->loop, &hl->mhd_timer, ms > INT_MAX ? INT_MAX : (int)ms, mhd_drive, hl);
    else
        loop_timer_stop(hl->loop, &hl->mhd_timer);
}

static void mhd_arm_timer(struct http_loop *hl)
{
    MHD_UNSIGNED_LONG_LONG ms = 0;
    mhd_set_timer(hl, MHD_get_timeout(hl->daemon, &ms) == MHD_YES, ms);
}

void http_mhd_run_soon(struct http_loop *hl)
{
    loop_soon(hl->loop, &hl->mhd_again, mhd_drive, hl);
}

/* A daemon at its connection limit takes its listening socket out of its
 * epoll set at the start of its next run, and puts it back only at the
 * start of a run after connections closed. With no thread of its own,
 * nothing runs it then: the last connections close, nothing is left to
 * wake the loop, and new clients wait in the backlog unaccepted (seen: a
 * flood of slow clients shed at the cap, then /metrics unanswered for
 * 10 s). So once it was full, the first run that leaves it below the limit
 * asks for one more, which takes the socket back and accepts. */
static void mhd_drive(void *arg)
{
    struct http_loop *hl = arg;
    /* A run often leaves work due at once (a timeout of 0): an answer
     * queued by a resumed handler is written by the next run, and a
     * connection's states take a run each. Waiting for the next turn for
     * it cost the loop an epoll_wait of its own per run (about one per
     * order, docs/speed.md). Running again here, at most MHD_RUNS_PER_TURN
     * times, keeps the loop's other events waiting for three runs at most,
     * each of which serves only what is ready. */
    MHD_UNSIGNED_LONG_LONG ms = 0;
    bool has = false;
    for (int run = 0; run < MHD_RUNS_PER_TURN; run++) {
        MHD_run(hl->daemon);
        has = MHD_get_timeout(hl->daemon, &ms) == MHD_YES;
        if (!has || ms != 0)
            break;
    }
    int open = atomic_load(&hl->connections);
    if (open >= hl->conn_limit) {
        hl->was_full = true;
    } else if (hl->was_full) {
        hl->was_full = false;
        http_mhd_run_soon(hl);
    }
    /* The last run's timeout: nothing has run since it was asked. */
    mhd_set_timer(hl, has, ms);
}

static void mhd_ready(void *arg, unsigned ready)
{
    (void)ready;
    mhd_drive(arg);
}

void http_mhd_attach(struct http_loop *hl)
{
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(hl->daemon, MHD_DAEMON_INFO_EPOLL_FD);
    loop_io_start(hl->loop, &hl->mhd_io, di->epoll_fd, LOOP_READ, mhd_ready, hl);
    mhd_arm_timer(hl);
}

void http_mhd_detach(struct http_loop *hl)
{
    loop_io_stop(hl->loop, &hl->mhd_io);
    loop_timer_stop(hl->loop, &hl->mhd_timer);
}

bool http_mhd_suspended(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_SUSPENDED);
    return ci != NULL && ci->suspended == MHD_YES;
}

void http_mhd_suspend(struct MHD_Connection *c)
{
    MHD_suspend_connection(c);
}

void http_mhd_resume(struct http_loop *hl, struct MHD_Connection *c)
{
    /* Resuming a connection that is not suspended is undefined in
     * libmicrohttpd; the caller's phase and MHD must agree. */
    assert(http_mhd_suspended(c));
    MHD_resume_connection(c);
    http_mhd_run_soon(hl);
}
