/* fiber.h - request code written top to bottom that waits without
 * blocking its thread. A fiber is a stack of its own (pooled, mmap'ed with
 * a guard of fiber_guard_size() bytes below it) on which a function runs; it belongs to the loop
 * (loop.h) of the thread that started it and only ever runs on that thread.
 * When the code needs to wait (for Redis, for MariaDB, for a socket), it
 * parks the fiber; the loop runs other work meanwhile, and the fiber
 * continues in the turn in which something makes it ready again. There is
 * no preemption: a fiber runs until it parks or ends.
 *
 * RULE: never hold a pthread mutex (or any lock another fiber of the same
 * thread may take) across a park, a wait on an fd (fiber_fd.h) or a call
 * that may park (an adapter's query). The fiber that wants the lock next
 * runs on the same thread as the holder, so it would wait forever and the
 * whole loop with it. Take locks only around code that does not wait.
 *
 * Off a fiber (fiber_self() == NULL: the background jobs' threads, the
 * main thread, tests), code keeps its blocking I/O; fiber_park and the
 * waits of fiber_fd.h may be called only on a fiber. */
#ifndef TICKETD_FIBER_H
#define TICKETD_FIBER_H

#include "loop.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fiber;

/* NULL on a plain thread (background jobs) */
struct fiber *fiber_self(void);

/* until fiber_ready(self); only on a fiber */
void fiber_park(void);

/* on f's loop thread: f runs again in this turn */
void fiber_ready(struct fiber *f);

/* On a fiber: parks it for ms (the loop serves others meanwhile). Off a
 * fiber: sleeps the thread. */
void fiber_sleep_ms(int64_t ms);

/* A fiber-local variable that falls back to a thread-local one off a
 * fiber, as a pthread key's is thread-local: whoever needs one owns a
 * static struct fiber_key (FIBER_KEY_INIT) and reaches its value through
 * fiber_slot(&key). base names none of its users. A key's first
 * fiber_slot takes it one of the FIBER_SLOTS slots for the life of the
 * process; a key beyond them aborts at its first use, naming the limit
 * (raise it then: each slot costs every fiber one pointer). */
#define FIBER_SLOTS 4
struct fiber_key {
    _Atomic int slot; /* 0: none taken yet; else the slot's index + 1 */
};
#define FIBER_KEY_INIT                                                                             \
    {                                                                                              \
        0                                                                                          \
    }
/* The address of key's value for the calling fiber (off a fiber, the
 * calling thread); a new fiber's values are all NULL. The key's owner
 * clears what it put there before the fiber ends. */
void **fiber_slot(struct fiber_key *key);

/* Starts fn(arg) on a new fiber of loop l; call on l's thread. The fiber
 * first runs in this turn (not inside this call). Returns NULL (logged once
 * in a while) when no stack can be mapped. When fn returns, the fiber ends
 * and its stack goes back to the loop thread's pool. */
struct fiber *fiber_spawn(struct loop *l, void (*fn)(void *), void *arg);

/* The number of fibers of the calling thread that have started and not
 * ended. */
int fiber_live(void);

/* Unmaps the calling thread's pool of spare stacks (at the end of a loop
 * thread). */
void fiber_pool_drain(void);

/* The size of one fiber stack, page-aligned at both ends, its struct fiber
 * (some 150 bytes) at its top included; larger under
 * AddressSanitizer, whose frames are bigger. */
size_t fiber_stack_size(void);

/* The size of the inaccessible guard right below each fiber stack (64 KiB,
 * whole pages): an overflow faults there, at once, instead of writing over
 * the memory below. */
size_t fiber_guard_size(void);

#endif
