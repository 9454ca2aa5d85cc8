/* loop.c - the event loop of a loop thread (loop.h): epoll, a binary heap
 * of timers, the turn's tasks and turn-end hooks, and posts from other
 * threads through an eventfd. Our own, about the size of Redis's ae: what
 * ticketd needs of a loop is this much, and the fibers (fiber.c) need a
 * "run this in the current turn" queue that libuv, libevent and libev
 * would each have to emulate with an idle or prepare watcher. */
#include "loop.h"

#include "log.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* Events taken from the kernel in one epoll_wait. */
#define LOOP_EVENTS 64

/* A timer's heap_at while it waits in the turn's list of expired timers
 * (between leaving the heap and running). */
#define TIMER_EXPIRED (-1)

struct post {
    void (*fn)(void *arg);
    void *arg;
    struct post *next;
};

/* A queue of tasks, run first in, first out. */
struct task_list {
    struct loop_task *head, *tail;
};

struct loop {
    int index;
    int epfd;
    _Atomic bool stop;

    /* The events of the epoll_wait being served; an io stopped meanwhile
     * is struck out of it, so that its later event is not delivered. */
    struct epoll_event events[LOOP_EVENTS];
    int nevents;

    /* Timers, a min-heap on due_ms: heap[i]->heap_at == i + 1. */
    struct loop_timer **heap;
    int nheap, capheap;
    /* The timers that expired this turn, run after the heap let them go:
     * one started again from its own callback waits for the next turn. */
    struct loop_timer **expired;
    int nexpired, capexpired;

    struct task_list soon;  /* due in this turn */
    struct task_list hooks; /* due at its end */

    /* Posts from other threads, and the eventfd that wakes the loop. */
    pthread_mutex_t post_mu;
    struct post *posts_head, *posts_tail;
    int wakefd;
    struct loop_io wake_io;
};

static __thread struct loop *self;
static _Atomic int loops;

int64_t loop_now_ms(void)
{
    return mono_ms();
}

struct loop *loop_self(void)
{
    return self;
}

int loop_index(const struct loop *l)
{
    return l->index;
}

void *loop_slot(const struct loop *l, void *array, int n, size_t size)
{
    if (l == NULL || l->index < 0 || l->index >= n)
        return NULL;
    return (char *)array + (size_t)l->index * size;
}

int loop_count(void)
{
    return atomic_load(&loops);
}

/* ---- file events ---- */

static uint32_t epoll_mask(unsigned want)
{
    return ((want & LOOP_READ) ? EPOLLIN : 0u) | ((want & LOOP_WRITE) ? EPOLLOUT : 0u);
}

/* Tells the kernel what io now wants; an io that wants nothing is not in
 * the set at all (a hang-up would otherwise be reported on every turn). */
static void io_sync(struct loop *l, struct loop_io *io, unsigned before)
{
    struct epoll_event ev = {.events = epoll_mask(io->want), .data.ptr = io};
    int op = before == 0 ? EPOLL_CTL_ADD : io->want == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    if (before == 0 && io->want == 0)
        return;
    if (epoll_ctl(l->epfd, op, io->fd, &ev) != 0)
        log_error("loop %d: epoll_ctl(%d) on fd %d: %s", l->index, op, io->fd, strerror(errno));
}

void loop_io_start(struct loop *l, struct loop_io *io, int fd, unsigned want, loop_io_fn *fn,
                   void *arg)
{
    io->fd = fd;
    io->fn = fn;
    io->arg = arg;
    io->want = want;
    io_sync(l, io, 0);
}

void loop_io_change(struct loop *l, struct loop_io *io, unsigned want)
{
    unsigned before = io->want;
    if (before == want)
        return;
    io->want = want;
    io_sync(l, io, before);
}

void loop_io_stop(struct loop *l, struct loop_io *io)
{
    loop_io_change(l, io, 0);
    for (int i = 0; i < l->nevents; i++) {
        if (l->events[i].data.ptr == io)
            l->events[i].data.ptr = NULL;
    }
}

static void serve_events(struct loop *l)
{
    for (int i = 0; i < l->nevents; i++) {
        struct loop_io *io = l->events[i].data.ptr;
        if (io == NULL)
            continue;
        uint32_t e = l->events[i].events;
        unsigned ready = ((e & EPOLLIN) ? LOOP_READ : 0u) | ((e & EPOLLOUT) ? LOOP_WRITE : 0u);
        if (e & (EPOLLERR | EPOLLHUP))
            ready |= LOOP_READ | LOOP_WRITE;
        ready &= io->want;
        if (ready != 0)
            io->fn(io->arg, ready);
    }
    l->nevents = 0;
}

/* ---- timers ---- */

static void heap_set(struct loop *l, int i, struct loop_timer *t)
{
    l->heap[i] = t;
    t->heap_at = i + 1;
}

static void heap_up(struct loop *l, int i)
{
    struct loop_timer *t = l->heap[i];
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (l->heap[parent]->due_ms <= t->due_ms)
            break;
        heap_set(l, i, l->heap[parent]);
        i = parent;
    }
    heap_set(l, i, t);
}

static void heap_down(struct loop *l, int i)
{
    struct loop_timer *t = l->heap[i];
    for (;;) {
        int child = 2 * i + 1;
        if (child >= l->nheap)
            break;
        if (child + 1 < l->nheap && l->heap[child + 1]->due_ms < l->heap[child]->due_ms)
            child++;
        if (t->due_ms <= l->heap[child]->due_ms)
            break;
        heap_set(l, i, l->heap[child]);
        i = child;
    }
    heap_set(l, i, t);
}

static void heap_remove(struct loop *l, struct loop_timer *t)
{
    int i = t->heap_at - 1;
    struct loop_timer *last = l->heap[--l->nheap];
    t->heap_at = 0;
    if (last == t)
        return;
    heap_set(l, i, last);
    heap_up(l, i);
    heap_down(l, last->heap_at - 1);
}

void loop_timer_stop(struct loop *l, struct loop_timer *t)
{
    if (t->heap_at > 0) {
        heap_remove(l, t);
    } else if (t->heap_at == TIMER_EXPIRED) {
        for (int i = 0; i < l->nexpired; i++) {
            if (l->expired[i] == t)
                l->expired[i] = NULL;
        }
        t->heap_at = 0;
    }
}

void loop_timer_start(struct loop *l, struct loop_timer *t, int ms, void (*fn)(void *), void *arg)
{
    loop_timer_stop(l, t);
    t->fn = fn;
    t->arg = arg;
    t->due_ms = loop_now_ms() + (ms > 0 ? ms : 0);
    if (l->nheap == l->capheap) {
        l->capheap = l->capheap ? 2 * l->capheap : 16;
        l->heap = xrealloc(l->heap, (size_t)l->capheap * sizeof *l->heap);
    }
    heap_set(l, l->nheap++, t);
    heap_up(l, l->nheap - 1);
}

/* Takes every timer due by now off the heap, then runs them. */
static void serve_timers(struct loop *l)
{
    int64_t now = loop_now_ms();
    while (l->nheap > 0 && l->heap[0]->due_ms <= now) {
        struct loop_timer *t = l->heap[0];
        heap_remove(l, t);
        if (l->nexpired == l->capexpired) {
            l->capexpired = l->capexpired ? 2 * l->capexpired : 16;
            l->expired = xrealloc(l->expired, (size_t)l->capexpired * sizeof *l->expired);
        }
        t->heap_at = TIMER_EXPIRED;
        l->expired[l->nexpired++] = t;
    }
    for (int i = 0; i < l->nexpired; i++) {
        struct loop_timer *t = l->expired[i];
        if (t == NULL)
            continue; /* stopped by an earlier one */
        t->heap_at = 0;
        l->expired[i] = NULL;
        t->fn(t->arg);
    }
    l->nexpired = 0;
}

/* ---- the turn's tasks and hooks ---- */

static void push(struct task_list *q, struct loop_task *t, void (*fn)(void *), void *arg)
{
    if (t->queued)
        return;
    t->fn = fn;
    t->arg = arg;
    t->queued = true;
    t->next = NULL;
    if (q->tail != NULL)
        q->tail->next = t;
    else
        q->head = t;
    q->tail = t;
}

void loop_soon(struct loop *l, struct loop_task *t, void (*fn)(void *), void *arg)
{
    push(&l->soon, t, fn, arg);
}

void loop_at_turn_end(struct loop *l, struct loop_task *t, void (*fn)(void *), void *arg)
{
    push(&l->hooks, t, fn, arg);
}

/* Runs what q holds now, each task taken off before it runs (so it may
 * queue itself again); what they queue on q meanwhile runs too when
 * whole is set, else in the next round. */
static void run_list(struct task_list *q, bool whole)
{
    struct task_list now = *q;
    struct task_list *from = whole ? q : &now;
    if (!whole)
        q->head = q->tail = NULL;
    while (from->head != NULL) {
        struct loop_task *t = from->head;
        from->head = t->next;
        if (from->head == NULL)
            from->tail = NULL;
        t->queued = false;
        t->next = NULL;
        t->fn(t->arg);
    }
}

/* Runs the tasks until none is left, then the turn-end tasks queued so
 * far (those they queue run in the next round), until neither is left:
 * what a turn-end task made ready (a batch answered at once) still runs
 * before the loop sleeps. */
static void settle(struct loop *l)
{
    while (l->soon.head != NULL || l->hooks.head != NULL) {
        run_list(&l->soon, true);
        run_list(&l->hooks, false);
    }
}

/* ---- posts from other threads ---- */

void loop_post(struct loop *l, void (*fn)(void *), void *arg)
{
    struct post *p = xmalloc(sizeof *p);
    p->fn = fn;
    p->arg = arg;
    p->next = NULL;
    pthread_mutex_lock(&l->post_mu);
    bool first = l->posts_head == NULL;
    if (l->posts_tail != NULL)
        l->posts_tail->next = p;
    else
        l->posts_head = p;
    l->posts_tail = p;
    pthread_mutex_unlock(&l->post_mu);
    /* One wake-up per batch of posts: the loop takes them all at once. */
    if (first) {
        uint64_t one = 1;
        while (write(l->wakefd, &one, sizeof one) < 0 && errno == EINTR)
            ;
    }
}

static void on_wake(void *arg, unsigned ready)
{
    struct loop *l = arg;
    uint64_t n;
    (void)ready;
    while (read(l->wakefd, &n, sizeof n) < 0 && errno == EINTR)
        ;
    pthread_mutex_lock(&l->post_mu);
    struct post *p = l->posts_head;
    l->posts_head = l->posts_tail = NULL;
    pthread_mutex_unlock(&l->post_mu);
    while (p != NULL) {
        struct post *next = p->next;
        p->fn(p->arg);
        free(p);
        p = next;
    }
}

/* ---- the loop ---- */

struct loop *loop_new(int index, int count)
{
    struct loop *l = xcalloc(1, sizeof *l);
    l->index = index;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (l->epfd < 0 || l->wakefd < 0) {
        log_error("loop %d: cannot create its epoll set or eventfd: %s", index, strerror(errno));
        if (l->epfd >= 0)
            close(l->epfd);
        if (l->wakefd >= 0)
            close(l->wakefd);
        free(l);
        return NULL;
    }
    pthread_mutex_init(&l->post_mu, NULL);
    loop_io_start(l, &l->wake_io, l->wakefd, LOOP_READ, on_wake, l);
    atomic_store(&loops, count);
    return l;
}

/* How long the turn may sleep: not at all with work due, else until the
 * nearest timer, else until an event. */
static int wait_ms(struct loop *l)
{
    if (l->soon.head != NULL || l->hooks.head != NULL || atomic_load(&l->stop))
        return 0;
    if (l->nheap == 0)
        return -1;
    int64_t left = l->heap[0]->due_ms - loop_now_ms();
    if (left <= 0)
        return 0;
    return left > 60000 ? 60000 : (int)left;
}

void loop_run(struct loop *l)
{
    struct loop *outer = self;
    self = l;
    /* The turn's access lines go out together when it ends (log.h). */
    bool gathering = log_gather(true);
    /* A turn first, then the stop is looked at: a stop asked before
     * loop_run still serves what was queued (loop.h). */
    do {
        int n = epoll_wait(l->epfd, l->events, LOOP_EVENTS, wait_ms(l));
        if (n < 0 && errno != EINTR) {
            log_error("loop %d: epoll_wait: %s", l->index, strerror(errno));
            break;
        }
        l->nevents = n > 0 ? n : 0;
        serve_events(l);
        serve_timers(l);
        settle(l);
        log_gather_flush();
    } while (!atomic_load(&l->stop));
    log_gather(gathering);
    atomic_store(&l->stop, false); /* a later loop_run runs again */
    self = outer;
}

bool loop_on_loop_thread(void)
{
    return self != NULL;
}

void loop_forbid_blocking(const char *what)
{
    if (self == NULL)
        return;
    log_error("loop %d: %s would block the loop thread (loop.h: nothing on a loop blocks)",
              self->index, what);
    abort();
}

void sleep_ms(int64_t ms)
{
    LOOP_MUST_NOT_BLOCK("sleep_ms");
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void loop_stop(struct loop *l)
{
    atomic_store(&l->stop, true);
    uint64_t one = 1;
    while (write(l->wakefd, &one, sizeof one) < 0 && errno == EINTR)
        ;
}

void loop_free(struct loop *l)
{
    if (l == NULL)
        return;
    struct post *p = l->posts_head;
    while (p != NULL) {
        struct post *next = p->next;
        free(p);
        p = next;
    }
    close(l->wakefd);
    close(l->epfd);
    pthread_mutex_destroy(&l->post_mu);
    free(l->heap);
    free(l->expired);
    free(l);
}
