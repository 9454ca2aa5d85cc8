/*
 * load_scen_kit.h - what the scenarios of ticketd-load are made of.
 *
 * A scenario file (load_scen_orders.c, load_scen_payments.c,
 * load_scen_events.c, load_scen_bench.c) plays one family of clients that
 * repeat themselves. It builds its requests the way ticketd's clients send
 * them (a JWT each, a signed body for payment callbacks), runs them through
 * its engine in batches whose groups of copies leave together, and writes
 * what the answers should add up to into the verdict ledger. The rest of the
 * tool sees only load_scenario.h; this header is internal to the scenarios.
 *
 * Not thread-safe per scenario: one thread drives one struct scen (mixed
 * runs give each part a copy of its own).
 */
#ifndef LOADTEST_LOAD_SCEN_KIT_H
#define LOADTEST_LOAD_SCEN_KIT_H

#include "load_engine.h"
#include "load_scenario.h"
#include "load_verdict.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One running scenario: its engine, its share of the bounds, its users. */
struct scen {
    const struct scen_env *env;
    const struct load_opts *o;
    struct verdict *v;
    struct load_engine *eng;
    int index;
    int concurrency;
    long long budget;
    uint64_t next_user;
    unsigned long key_seq;
    unsigned long txn_seq;
};

/* True once scenario_interrupt() was called: start nothing new. */
bool scen_interrupted(void);

/* ---- requests ---- */

/* A new user of this scenario, never one of another scenario of the run
 * (each draws from its own range). */
uint64_t user_new(struct scen *s);
/* A new Idempotency-Key, and a new payment txn_id, unique in the run. */
void key_new(struct scen *s, char *out, size_t len);
void txn_new(struct scen *s, char *out, size_t len);

/* POST /api/v1/tokens as user. */
struct load_req *req_token(struct scen *s, uint64_t user);
/* POST /api/v1/orders as user under key; token NULL or "": none sent. */
struct load_req *req_order(struct scen *s, uint64_t user, const char *key, const char *token,
                           uint64_t session, int quantity);
/* POST /api/v1/orders/batch (a cart) as user under batch key key, body
 * borrowed; token NULL or "": none sent. */
struct load_req *req_batch(struct scen *s, uint64_t user, const char *key, const char *token,
                           const json_t *body);
/* POST /api/v1/orders/{order_no}/cancel as user. */
struct load_req *req_cancel(struct scen *s, uint64_t user, const char *order_no);

/* How a callback is signed: rightly, with a wrong signature, or with a
 * timestamp an hour old. */
enum sig_mode { SIG_GOOD, SIG_BAD, SIG_STALE };
/* POST /api/v1/payments/callback, signed with the pay secret as mode says. */
struct load_req *req_callback(struct scen *s, const char *txn, const char *order_no,
                              long long amount, const char *status, enum sig_mode mode);

/* Creates a session through the admin API and registers it with the
 * ledger. Returns the ledger index, or -1 (recorded with verdict_fail). */
int session_create(struct scen *s, const char *what, long long stock, uint64_t *id);
/* The session a scenario orders on: --session if given (not accounted,
 * others may use it), else a fresh one. Returns the ledger index or -2 for
 * an unaccounted session, -1 on failure. */
int session_pick(struct scen *s, const char *what, long long stock, uint64_t *id);

/* ---- answers ---- */

/* A string member of the answer's JSON body ("" when absent), and an
 * integer one (-1 when absent). */
const char *json_str(const struct load_req *r, const char *name);
long long json_int(const struct load_req *r, const char *name);
/* No answer, or a 5xx: the request may or may not have taken effect. */
bool answer_uncertain(const struct load_req *r);
/* A last answer that only says "later": no answer at all, or a 503 with
 * Retry-After, once the client's retries were spent. Not forbidden; the
 * engine counts the request as never answered (a run error). */
bool answer_transient(const struct load_req *r);
/* A problem code the run allows besides the scenario's own (--allow). */
bool opt_allows(const struct load_opts *o, const char *code);
/* The answer is this status with this problem code. */
bool is_code(const struct load_req *r, long status, const char *code);
/* The answer in a few words, into buf: "409 DUPLICATE_SUBMISSION
 * @session-lock", "201 replayed @unique-index". Returns buf. */
const char *answer_text(const struct load_req *r, char *buf, size_t len);

/* ---- batches ---- */

/*
 * A list of requests started in order. A group (the copies of one key, the
 * clicks of one burst) starts only when the whole group fits in the free
 * slots, so that its members leave together. Zero-initialised before use.
 */
struct batch {
    struct load_req **reqs;
    int *group; /* at a group's first request: its size; else 0 */
    size_t n;
    size_t cap;
    size_t pos;
    size_t last_group;
    int concurrency;
    struct scen *s;
    load_done_fn done;
    void *arg;
};

/* How a request joins a batch: alone, as the first of a new group, or as
 * one more member of the group started last. */
enum batch_mode { BATCH_SOLO, BATCH_GROUP, BATCH_JOIN };

/* Appends r (the batch owns it from now on). */
void batch_add(struct batch *b, struct load_req *r, enum batch_mode mode);
/* Runs the batch with the scenario's concurrency, done(arg, r) for each
 * answer, and frees it; requests the bounds left unsent are freed without
 * an answer. */
void batch_run(struct scen *s, struct batch *b, load_done_fn done, void *arg);

/* ---- buyers, for the scenarios that buy ---- */

struct buyer {
    uint64_t user;
    char key[72];
    char token[160];
    bool token_ok;
    char order_no[32];
    long long amount;
    bool ordered;
};

/* Gets one order token per buyer (or marks them all ready with --no-token).
 * Returns how many buyers have a token. */
int tokens_fetch(struct scen *s, struct buyer *buyers, int n);
/* One order for each buyer with a token, under a new key, on session
 * (ledger index sidx), where the order itself is not the point
 * (gateway-retry, mq-redelivery). Returns how many were created. */
int buyers_order(struct scen *s, struct buyer *buyers, int n, uint64_t session, int sidx);

/* ---- the scenarios (one family a file) ---- */

/* load_scen_orders.c: the same order sent again. */
int scen_retry_storm(struct scen *s);
int scen_double_click(struct scen *s);
int scen_flash_sale(struct scen *s);
/* load_scen_payments.c: a payment gateway that repeats itself. */
int scen_gateway_retry(struct scen *s);
/* load_scen_events.c: events delivered again to the consumers. */
int scen_mq_redelivery(struct scen *s);
/* load_scen_cart.c: carts sent again, sharing items, partly sold out. */
int scen_cart_storm(struct scen *s);
/* load_scen_refusals.c: refusals Redis decides, before the order-key filter. */
int scen_refusal_storm(struct scen *s);
/* load_scen_bench.c: open-ended new orders, for the benchmarks. */
int scen_new_orders(struct scen *s);
int scen_hot_session(struct scen *s);

#endif
