/*
 * load_engine.h - concurrent HTTP requests against one or more ticketd
 * instances (libcurl multi interface), with every answer recorded.
 *
 * A scenario drives the engine with two callbacks: next() hands it the next
 * request to start while a slot is free, done() receives each answer. All
 * requests that next() returns in one go start together, before any of them
 * is transferred, so a group of copies hits the server at the same moment.
 *
 * The engine enforces the run's bounds: no request is started past the
 * request budget or the deadline; requests in flight are finished. Control
 * requests (creating sessions, reading the audit) go through
 * load_engine_call(), outside the budget.
 *
 * It retries as a careful client does: a request whose answer is uncertain
 * (no HTTP answer, or a 5xx) is sent again, the same request (key, token,
 * body), after the answer's Retry-After (else 1 s), at most `retries` times
 * and not later than `retry_window_s` after its first attempt; after a
 * transport error it goes to the next target, as a client behind a load
 * balancer would. Only the last answer reaches done(): that is the answer
 * the client acts on. Every attempt is counted (requests, latency, time
 * series); the attempts that were followed by a retry are kept apart in the
 * answers (retried = true).
 *
 * An engine and its requests belong to one thread; several engines may run
 * in different threads.
 */
#ifndef LOADTEST_LOAD_ENGINE_H
#define LOADTEST_LOAD_ENGINE_H

#include "hist.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

/* What a request is for; the verdict counts and times them apart. */
enum load_kind {
    LOAD_ORDER,    /* POST /api/v1/orders */
    LOAD_TOKEN,    /* POST /api/v1/tokens */
    LOAD_CALLBACK, /* POST /api/v1/payments/callback */
    LOAD_CANCEL,   /* POST /api/v1/orders/{no}/cancel */
    LOAD_CONTROL,  /* set-up and checks: sessions, audit, /me, order reads */
    LOAD_KIND_COUNT,
};

/* Distinct (kind, status, code, layer, replayed) answers kept apart; more
 * than this and the rest are counted as "other". */
#define LOAD_ANSWERS_MAX 160

struct load_answer {
    enum load_kind kind;
    long status;
    char code[40];  /* problem `code`, or the callback `outcome` */
    char layer[32]; /* Idempotency-Layer */
    bool replayed;  /* Idempotent-Replayed: true, or "replayed": true */
    bool retried;   /* the client sent the request again after this answer */
    uint64_t count;
};

/* The time series keeps one tick per interval (default a second) of the
 * run, at most LOAD_TICKS_MAX of them; a longer run keeps its figures but
 * stops the series (truncated). */
#define LOAD_TICK_S    1.0
#define LOAD_TICKS_MAX 36000

/* The load requests that finished within one interval of the run. */
struct load_tick {
    uint64_t done;       /* finished, with or without an answer */
    uint64_t errors;     /* transport errors and 5xx */
    uint64_t created;    /* 201 on POST /orders, not replayed */
    uint64_t replays;    /* 201 replayed on POST /orders */
    uint64_t rejections; /* 4xx */
    struct hist_small latency;
};

struct load_stats {
    uint64_t requests[LOAD_KIND_COUNT]; /* HTTP requests sent, retries included */
    uint64_t transport_errors[LOAD_KIND_COUNT];
    uint64_t server_errors[LOAD_KIND_COUNT]; /* 5xx */
    uint64_t retries[LOAD_KIND_COUNT];       /* attempts that were sent again */
    /* Requests whose last answer was still uncertain (no HTTP answer, a
     * 5xx, or "in progress" where the client waits for the outcome) once
     * the retries were spent: the client never learnt what happened. */
    uint64_t unanswered[LOAD_KIND_COUNT];
    uint64_t orders_created;  /* 201 on POST /orders, not replayed */
    struct hist latency_load; /* every kind but LOAD_CONTROL */
    struct hist latency[LOAD_KIND_COUNT];
    struct load_answer answers[LOAD_ANSWERS_MAX];
    unsigned answer_count;
    uint64_t answers_other;
    char first_transport_error[600];
    double elapsed_s; /* wall time spent in load_engine_run() */

    /* Time series of load requests by the interval they finished in,
     * counted from t0 (monotonic seconds, load_now()), tick_s seconds
     * each. Owned. */
    double t0;
    double tick_s;
    struct load_tick *ticks;
    size_t tick_count;
    bool ticks_truncated;
};

struct load_req {
    enum load_kind kind;
    const char *method; /* "GET" or "POST", static */
    /* Owned, of any length: a scoped audit names hundreds of sessions in
     * its query, and a path cut to a fixed buffer would ask about other
     * sessions than the run's, or be refused (an id cut at a comma). */
    char *path;
    char *body; /* owned; NULL sends an empty body */
    size_t body_len;
    struct curl_slist *headers; /* owned */
    int target;                 /* index into the targets; -1: round robin */
    bool first_choice;          /* target is only where it goes first: fail over as unpinned */
    double delay_s;             /* start this long after next() returned it (0: at once) */
    bool retry_in_progress;     /* also retry 409 REQUEST_IN_PROGRESS (wait for the outcome) */

    /* The client that sends it (the user of its JWT; 0: none), for the
     * history, and the operation number the history gave this attempt. */
    uint64_t client;
    long long op;

    /* Scenario's own bookkeeping, untouched by the engine. */
    void *owner;
    long tag;
    long tag2;

    /* The answer, filled in before done() is called. */
    long status; /* 0 on a transport error */
    char error[256];
    char code[40];
    char layer[32];
    bool replayed;
    long retry_after_s; /* Retry-After in seconds, -1 if absent */
    json_t *json;       /* the parsed body if it was JSON, else NULL; owned */
    uint64_t latency_us;
    double t_start;
    double t_end;
    int attempts;   /* times sent; > 1: the answer is that of a retry */
    bool uncertain; /* the last answer left the outcome unknown (see load_stats) */

    /* Engine internals. */
    bool pinned; /* the target was chosen by the caller: no failover */
    bool expect_off;
    double first_start;
    double not_before;
    void *easy;
    char *resp;
    size_t resp_len;
    size_t resp_cap;
};

struct load_engine_config {
    const char *const *targets; /* base URLs, e.g. http://127.0.0.1:8080; borrowed */
    int target_count;
    long timeout_ms;
    long long max_requests; /* budget of load requests; <= 0: none */
    double deadline;        /* monotonic seconds (load_now()); <= 0: none */
    double series_t0;       /* second 0 of the time series; <= 0: engine creation */
    double series_tick_s;   /* interval of the time series; <= 0: LOAD_TICK_S */
    int retries;            /* re-sends of an uncertain request; 0: none */
    double retry_window_s;  /* no re-send later than this after the first attempt */
    int verbose;
    FILE *orders_out; /* the order_no of every final 201 to POST /orders, one a line; or NULL */
};

struct load_engine;

/* Seconds on the monotonic clock. */
double load_now(void);

/* HTTP answers to load requests (every kind but LOAD_CONTROL, every
 * attempt, retries included) received so far by all engines of the
 * process. Thread-safe: a fault tied to the load's progress reads it. */
uint64_t load_answers(void);

/* Unix time in seconds, for signatures. */
long long load_unix_now(void);

/* Who is told of every load request's attempt as it leaves and as its
 * answer comes (the run's history, load_history.h): set once, before any
 * engine runs, and shared by them all (a mixed run has several). NULL
 * members: nobody. The engine knows nothing of what the observer does
 * with them, so that it needs nothing of the history's. */
struct load_observer {
    void (*sent)(struct load_req *r);           /* may number r (r->op) */
    void (*answered)(const struct load_req *r); /* the answer, or its failure, is in */
};
void load_engine_observe(const struct load_observer *o);

/* Returns a new engine, or NULL. The config is copied; its strings are
 * borrowed and must outlive the engine. */
struct load_engine *load_engine_new(const struct load_engine_config *cfg);
void load_engine_free(struct load_engine *e);

/* Returns a new request with method and path (printf format); abort on OOM. */
struct load_req *load_req_new(enum load_kind kind, const char *method, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void load_req_free(struct load_req *r);

/* Adds one header line ("Name: value", printf format). */
void load_req_header(struct load_req *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Sets the body to the compact JSON of obj (borrowed) and adds the JSON
 * Content-Type. */
void load_req_json(struct load_req *r, const json_t *obj);

/* Sets the raw body (copied), as given, for signed callbacks. */
void load_req_raw(struct load_req *r, const char *body, size_t len);

/* Returns the next request to start (the engine takes it), or NULL for
 * "nothing more now". free_slots is how many more may start at once. */
typedef struct load_req *(*load_next_fn)(void *arg, int free_slots);

/* Receives a finished request; the engine frees it afterwards. */
typedef void (*load_done_fn)(void *arg, struct load_req *r);

/*
 * Runs until next() has nothing more and nothing is in flight, or the
 * budget or deadline is reached and everything in flight has finished.
 * Returns 0, or -1 on an internal libcurl error.
 */
int load_engine_run(struct load_engine *e, int concurrency, load_next_fn next, load_done_fn done,
                    void *arg);

/* Like load_engine_run() but for control reads: outside the budget and
 * the deadline (each request is still bounded by the timeout). */
int load_engine_run_control(struct load_engine *e, int concurrency, load_next_fn next,
                            load_done_fn done, void *arg);

/* How many more load requests may start now: 0 once the budget is spent or
 * the deadline has passed (or after load_engine_stop()). */
long long load_engine_budget_left(const struct load_engine *e);

/* Makes the budget zero: nothing new starts. */
void load_engine_stop(struct load_engine *e);

/* Makes every engine's budget zero (SIGINT); async-signal safe. */
void load_engine_interrupt(void);

/*
 * Performs r now, synchronously, outside the budget and deadline, records
 * it as LOAD_CONTROL and fills in the answer (retrying as load requests
 * are). The caller keeps r.
 * Returns 0 if an HTTP answer arrived (any status), -1 on transport error.
 */
int load_engine_call(struct load_engine *e, struct load_req *r);

/* Borrowed; valid for the engine's life. */
const struct load_stats *load_engine_stats(const struct load_engine *e);

/* Adds src's figures to the engine's own (a run of several engines). */
void load_engine_stats_add(struct load_engine *e, const struct load_stats *src);

/* Adds src's figures to dst (for several engines in one run). */
void load_stats_merge(struct load_stats *dst, const struct load_stats *src);

/* Returns a new zeroed stats object; abort on OOM. */
struct load_stats *load_stats_new(void);
void load_stats_free(struct load_stats *st);

/* True when the answer leaves the request's outcome unknown: no HTTP
 * answer, a 5xx, or (with retry_in_progress) 409 REQUEST_IN_PROGRESS. */
bool load_answer_uncertain(const struct load_req *r);

/* Memory helpers that abort on out-of-memory, as a CLI tool may. */
void *load_xcalloc(size_t n, size_t size);
char *load_xstrdup(const char *s);

#endif
