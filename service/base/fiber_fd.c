/* fiber_fd.c - waits on an fd kept in its loop's epoll set (fiber_fd.h). */
#include "fiber_fd.h"

#include "fiber.h"

#include <assert.h>
#include <stddef.h>

static void fd_ready(void *arg, unsigned ready)
{
    struct fiber_fd *ff = arg;
    if (ff->waiter == NULL) {
        /* Readable with nobody waiting: the peer closed the connection,
         * or said something unasked. Out of the set until the next wait,
         * or every turn would find it again. */
        loop_io_stop(ff->loop, &ff->io);
        ff->loop = NULL;
        return;
    }
    ff->ready |= ready;
    fiber_ready(ff->waiter);
}

struct fd_timer {
    struct loop_timer timer;
    struct fiber *f;
};

static void fd_timed_out(void *arg)
{
    struct fd_timer *t = arg;
    fiber_ready(t->f);
}

unsigned fiber_fd_wait(struct fiber_fd *ff, int fd, unsigned want, int timeout_ms)
{
    struct fiber *f = fiber_self();
    struct loop *l = loop_self();
    assert(f != NULL && l != NULL && ff->waiter == NULL);
    assert(ff->loop == NULL || (ff->loop == l && ff->io.fd == fd));
    /* A wait watches what it wants (a wait for writing alone must not
     * wake at every turn the fd is readable); in between, reading stays
     * watched, which the next wait nearly always wants: no epoll_ctl
     * then. */
    if (ff->loop == NULL) {
        loop_io_start(l, &ff->io, fd, want, fd_ready, ff);
        ff->loop = l;
    } else {
        loop_io_change(l, &ff->io, want);
    }
    ff->waiter = f;
    ff->ready = 0;
    struct fd_timer t = {.f = f};
    if (timeout_ms >= 0)
        loop_timer_start(l, &t.timer, timeout_ms, fd_timed_out, &t);
    /* Parks again after a wake-up meant for something else (a pending
     * fiber_ready is kept for whoever parks next). */
    while (ff->ready == 0 && (timeout_ms < 0 || t.timer.heap_at != 0))
        fiber_park();
    loop_timer_stop(l, &t.timer);
    ff->waiter = NULL;
    if (ff->loop != NULL)
        loop_io_change(l, &ff->io, LOOP_READ);
    return ff->ready;
}

unsigned fiber_wait_io(int fd, unsigned want, int timeout_ms)
{
    struct fiber_fd once = {0};
    unsigned ready = fiber_fd_wait(&once, fd, want, timeout_ms);
    fiber_fd_forget(&once);
    return ready;
}

void fiber_fd_forget(struct fiber_fd *ff)
{
    if (ff->loop != NULL && ff->loop == loop_self())
        loop_io_stop(ff->loop, &ff->io);
    ff->loop = NULL;
}

bool fiber_fd_watched(const struct fiber_fd *ff)
{
    return ff->loop != NULL;
}
