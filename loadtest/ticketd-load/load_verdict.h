/*
 * load_verdict.h - what a run expected, what the service says, and the
 * verdict table.
 *
 * Scenarios write their expectations into one ledger while they run: the
 * sessions they created and the seats their orders hold, the points each
 * paying user should end with, and every piece of damage they saw in the
 * answers themselves (two orders for one key, two applied payments for one
 * order). After the load, verdict_check() compares that with what ticketd
 * reports (session stock, /me, the admin audit) and verdict_print() prints
 * the table. Damage is what the guarantees forbid (oversold seats, double
 * applied payments, double credited points, two orders for one key) and
 * every answer the contract does not allow (a forbidden answer: a client
 * told "refused" for an order that exists, a retry not given its order).
 * Observations are oddities that are not answers (paid orders not yet
 * ticketed, seats taken without an order to show for them): listed, not
 * damage.
 *
 * Thread-safe while the load runs: the recording functions take the
 * ledger's lock. verdict_check() and verdict_print() run alone, after it.
 */
#ifndef LOADTEST_LOAD_VERDICT_H
#define LOADTEST_LOAD_VERDICT_H

#include "load_engine.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum verdict_damage {
    DAMAGE_OVERSOLD,         /* seats sold beyond capacity / stock taken */
    DAMAGE_DUPLICATE_ORDER,  /* a second order for one (user, key) */
    DAMAGE_TOKEN_REUSED,     /* a second order bought with one order token */
    DAMAGE_DOUBLE_PAYMENT,   /* a second applied payment for one order */
    DAMAGE_REFUND_APPLIED,   /* a payment that paid its order and was also sent for refund */
    DAMAGE_PAID_CANCELLED,   /* an order both cancelled and paid */
    DAMAGE_DOUBLE_POINTS,    /* points above 1 per 100 cents of paid orders */
    DAMAGE_MISSING_POINTS,   /* points still below that after the wait */
    DAMAGE_LOCK_BYPASSED,    /* an order made while another click held the session lock */
    DAMAGE_FAILURE_REPLAYED, /* a failure replayed to a retry (unit: answers) */
    DAMAGE_FORBIDDEN_ANSWER, /* an answer the contract does not allow (unit: answers) */
    DAMAGE_CART_ITEM_TWICE,  /* a second order for one item key of a cart (unit: orders) */
    DAMAGE_WRONG_REFUSAL,    /* a key with an order told 409 (unit: answers) */
    DAMAGE_COUNT,
};

struct verdict;

/* Returns a new, empty ledger; abort on OOM. */
struct verdict *verdict_new(void);
void verdict_free(struct verdict *v);

/* Records a session whose stock the run accounts for: created by the run
 * (fresh: only the run's orders hold its seats). Returns its index. */
int verdict_session_add(struct verdict *v, uint64_t id, long long capacity);

/* Seats held by the run's orders on session idx: +quantity on a created
 * order, -quantity on a cancel. */
void verdict_session_held(struct verdict *v, int idx, long long delta);

/* An order request on session idx ended without a known outcome
 * (transport error or 5xx): its seats may or may not be held. */
void verdict_session_uncertain(struct verdict *v, int idx);

/* The user's /me points must end at this sum (add 0 to check a user that
 * paid nothing). */
void verdict_points_expect(struct verdict *v, uint64_t user_id, long long points);

/* Records n units of damage with an explanation (printf format). */
void verdict_damage(struct verdict *v, enum verdict_damage kind, long long n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Records one answer the contract does not allow: damage of its own kind
 * (DAMAGE_FORBIDDEN_ANSWER, counted in answers), with an explanation. */
void verdict_anomaly(struct verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The same for n answers at once. */
void verdict_anomalies(struct verdict *v, long long n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records an oddity that is not an answer (e.g. paid orders not ticketed
 * after the wait): listed, not damage. */
void verdict_observation(struct verdict *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Adds n to the scenario figure called name (a static string), e.g.
 * "double_click.bursts"; the JSON report lists them under "figures". */
void verdict_figure(struct verdict *v, const char *name, long long n);

/* Adds a line to the scenario summary (what the scenario saw). */
void verdict_note(struct verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Marks the run as failed for a reason other than damage (set-up failed,
 * target unreachable): exit code 1. */
void verdict_fail(struct verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Paid orders whose ticketing the check should wait for (GET by order_no,
 * status TICKETED or COMPLETED), with the JWT of their owner. */
void verdict_ticket_expect(struct verdict *v, uint64_t user_id, const char *order_no);

/*
 * Asks the service: waits up to settle_s for /me points and ticketing to
 * catch up, reads every session's stock and the admin audit, and turns the
 * differences into damage. Uses e (control requests) and the secrets to
 * mint tokens. Returns 0, or -1 if the service could not be read.
 */
int verdict_check(struct verdict *v, struct load_engine *e, const char *jwt_secret,
                  uint64_t admin_user, double settle_s, bool audit);

/* 2 if damage was found (forbidden answers included), else 1 if the run
 * failed (set-up, unreachable target, a fault command that failed, load
 * requests that never got a definite answer once the client's retries
 * were spent), else 0. A transport error or a 5xx followed by a retry that
 * got its answer is no failure: the client got what it asked for. */
int verdict_exit_code(const struct verdict *v, const struct load_stats *st);

/* Total damage units found. */
long long verdict_damage_total(const struct verdict *v);

/* True if verdict_fail() was called. */
bool verdict_failed(const struct verdict *v);

/* The --fault command of a run: what ran, when, and how it ended. It ran
 * during the load (verdict_fault_during_load) when the load received
 * answers both before and after it started. */
struct verdict_fault {
    const char *command;      /* NULL: the run had none */
    long long after_answers;  /* asked for: after this many load answers (-1: at_s) */
    double at_s;              /* asked for, from the load's start (-1: after_answers) */
    long long answers_before; /* load answers received when it started */
    long long answers_after;  /* load answers received after it started, before the end */
    double started_s;         /* when it started, from the load's start (-1: never) */
    double ended_s;           /* when it ended, from the load's start */
    double load_end_s;        /* when the load ended */
    int exit_status;          /* -1: killed by a signal or could not run */
};

bool verdict_fault_during_load(const struct verdict_fault *f);

struct verdict_run_info {
    const char *scenario;
    unsigned long long seed; /* --seed: the same seed, the same requests */
    const struct verdict_fault *fault;
    const char *const *targets;
    int target_count;
    int concurrency;
    long long max_requests;
    double duration_s;
    double started_unix; /* wall clock of the load's start, second 0 of the series */
};

/* Prints the verdict table to out; and writes the same figures as JSON to
 * json_path if not NULL. Returns -1 if the JSON file cannot be written. */
int verdict_print(const struct verdict *v, const struct load_stats *st,
                  const struct verdict_run_info *info, FILE *out, const char *json_path);

#endif
