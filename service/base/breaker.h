/* breaker.h - one shared view of a dependency's health: a circuit breaker.
 *
 * A loop's fibers share its Redis connection and borrow its MariaDB ones,
 * background jobs' threads have connections of their own, but the
 * question "is it up?" has one answer for the whole process. After a call
 * fails on the link (refused, reset, timed out), the breaker opens: for
 * cooldown_ms every caller is refused at once instead of each paying a
 * timeout against a paused or dead server. Then exactly one caller is let
 * through as a probe; its success closes the breaker for every caller at
 * once, its failure opens it again.
 *
 *   closed ──failure──> open ──cooldown over──> one probe ──success──> closed
 *                        ^                          │
 *                        └────────failure───────────┘
 *
 * Pure logic on atomics: the caller passes the time, so the unit tests
 * drive it with a fake clock. Thread-safe; no locks. */
#ifndef TICKETD_BREAKER_H
#define TICKETD_BREAKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct breaker {
    const char *name; /* for the log: "redis", "mysql" */
    int cooldown_ms;
    _Atomic int64_t open_until_ms; /* 0 while closed */
    atomic_bool probing;           /* a probe is out */
    _Atomic uint64_t opened;       /* times it went from closed to open */
};

enum breaker_pass {
    BREAKER_REFUSED, /* open: fail fast, do not call */
    BREAKER_CALL,    /* closed: call as usual */
    BREAKER_PROBE,   /* the one probe after the cooldown: call, then report */
};

#define BREAKER_INIT(name_, cooldown_)                                                             \
    {                                                                                              \
        .name = (name_), .cooldown_ms = (cooldown_)                                                \
    }

/* May a call go out at now_ms? */
enum breaker_pass breaker_ask(struct breaker *b, int64_t now_ms);

/* The call given pass succeeded: a probe's success closes the breaker. */
void breaker_success(struct breaker *b, enum breaker_pass pass);

/* The call given pass failed on the link: (re)opens the breaker until
 * now_ms + cooldown. Returns true when this failure opened a closed one. */
bool breaker_failure(struct breaker *b, enum breaker_pass pass, int64_t now_ms);

/* True while calls are being refused (open, cooldown not over). */
bool breaker_is_open(struct breaker *b, int64_t now_ms);

#endif
