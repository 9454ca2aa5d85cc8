/* fiber_fd.h - a file descriptor that fibers wait on again and again (a
 * database connection), kept in its loop's epoll set between the waits.
 *
 * A wait of its own (fiber_wait_io) registers its fd and removes it
 * after: two epoll_ctl calls per wait. A connection that answers each
 * statement of every batch waits many times over its life, always on the
 * same loop, so a fiber_fd keeps it registered (for reading) from its
 * first wait until fiber_fd_forget; a wait costs an epoll_ctl only when it wants something
 * other than reading (writing, when the socket's buffer is full). Watched
 * level-triggered, an fd that turns readable while no fiber waits on it
 * (the server closed an idle connection) would wake the loop at every
 * turn: it leaves the set at its first such event, and the next wait puts
 * it back.
 *
 * Rules: one fiber waits on a fiber_fd at a time; all of its waits are on
 * one loop; and fiber_fd_forget runs before the fd is closed. */
#ifndef TICKETD_FIBER_FD_H
#define TICKETD_FIBER_FD_H

#include "loop.h"

#include <stdbool.h>

struct fiber;

/* Caller-owned; zero it before first use. */
struct fiber_fd {
    struct loop *loop; /* whose epoll set holds the fd; NULL: none */
    struct loop_io io;
    struct fiber *waiter; /* the fiber parked in fiber_fd_wait, or NULL */
    unsigned ready;
};

/* On a fiber: parks it until fd is ready for want (LOOP_READ and/or
 * LOOP_WRITE) or timeout_ms passes (-1: no timeout). Returns the ready
 * mask, 0 on timeout. fd is the one of every earlier wait since the last
 * fiber_fd_forget. */
unsigned fiber_fd_wait(struct fiber_fd *ff, int fd, unsigned want, int timeout_ms);

/* A wait of its own on fd: in the loop's set for this wait only. Parks
 * until fd is ready for want or timeout_ms passes (-1: none). Returns the
 * ready mask, 0 on timeout. Only on a fiber. */
unsigned fiber_wait_io(int fd, unsigned want, int timeout_ms);

/* The fd is about to be closed: out of its loop's set. On the loop's
 * thread; off it (the loop has stopped), the set is left to the close. */
void fiber_fd_forget(struct fiber_fd *ff);

/* Whether the fd is in its loop's set now (for tests). */
bool fiber_fd_watched(const struct fiber_fd *ff);

#endif
