/* order_rows.h - the order flow's cases as rows of a table, shared by
 * the domain's tests of each defence (test_response_cache.c,
 * test_inflight_key.c, test_session_lock.c, test_token.c,
 * test_unique_index.c) and of the flow itself (test_orders.c).
 *
 * Each case is a row: the defences switched off, what the fakes (fakes.h)
 * hold and answer, and what orders_create() must do. rows_run() plays
 * every row as a cmocka test of its own, named by the row, so a broken
 * defence shows as the rows that describe it. What only one row asserts
 * lives in that row's `then` function, beside the row. */
#ifndef TICKETD_TEST_ORDER_ROWS_H
#define TICKETD_TEST_ORDER_ROWS_H

#include "app.h"
#include "config.h"
#include "metrics.h"
#include "orders.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct CMUnitTest;

#define USER    42
#define KEY     "key-1"
#define SESSION 7
#define QTY     2
#define TOKEN   "tok-abc"

/* This process's id; a KEY_MARKER names another process. */
#define OUR_INSTANCE   "fedcba9876543210"
#define OTHER_INSTANCE "0123456789abcdef"

/* The order the database holds under the key in the FOUND_* rows. */
#define FOUND_NO   "26113000000000000042"
#define FOUND_BODY "{\"order_no\":\"" FOUND_NO "\",\"session_id\":7,\"quantity\":2}"

/* The answers a completed record in Redis, and the in-process cache, hold. */
#define REDIS_BODY "{\"from\":\"redis\"}"
#define LOCAL_BODY "{\"cached\":1}"

#define FULL_PATH "order_begin order_create order_complete"
/* The path when the key step found a record that a switched-off layer
 * would have answered (or garbage): the lock is then taken on its own. */
#define LOCK_APART "order_begin lock_acquire token_take order_create order_complete"

/* The path when a Redis refusal is checked against the database. */
#define ALIVE_THEN_DB "order_begin instance_alive order_find_request"
/* The token refused: marker and lock are ours, given back unless the
 * database has the order. */
#define TOKEN_THEN_DB     "order_begin order_find_request order_release"
#define TAKE_OVER_THEN_DB "order_begin instance_alive order_take_over order_find_request"

/* --- what a row says ---------------------------------------------------- */

/* What Redis holds under the key when the request arrives. */
enum under_key {
    KEY_EMPTY,
    KEY_DONE,           /* a completed record of this payload */
    KEY_DONE_OTHER_QTY, /* ... of another quantity */
    KEY_MARKER,         /* another process's in-flight marker, this payload */
    KEY_MARKER_OTHER_SESSION,
    KEY_MARKER_OURS, /* a marker of this very process */
    KEY_GARBAGE,     /* no record at all */
};

/* What the in-process response cache holds under the key. */
enum local { LOCAL_NONE, LOCAL_SAME, LOCAL_OTHER_QTY, LOCAL_OFF /* no cache at all */ };

/* The order the database holds under the key (find_rc TD_OK). */
enum found { FOUND_NONE, FOUND_SAME, FOUND_OTHER_QTY, FOUND_OTHER_SESSION };

/* The X-Order-Token sent: TOKEN, none, or one signed by ordertoken.c. */
enum token { TOK_PLAIN, TOK_NONE, TOK_SIGNED, TOK_EXPIRED, TOK_OTHER_USER };

/* After the run: is the answer kept in-process (0: not looked at)? */
enum cached { CACHED_ANY, CACHED, NOT_CACHED };

/* After the run: what happened to the marker and lock this request took
 * (0: not looked at). */
enum claims {
    CLAIMS_ANY,
    CLAIMS_KEPT,      /* nothing released: not ours, or the answer was stored */
    CLAIMS_RELEASED,  /* a failure: both handed back, no body, nothing kept */
    CLAIMS_COMPLETED, /* stored under the marker and owner this request set */
};

/* After the run: the token the draft asked the database to record, when
 * an order was written (0: not looked at). */
enum recorded { RECORDED_ANY, RECORDED_SENT /* the key of the token sent */, RECORDED_NONE };

struct count {
    bool on;
    enum metric m;
    int64_t n;
};
/* clang-format off */
#define COUNTS(m, n) {true, m, n}
/* clang-format on */

struct order_case {
    const char *name;
    /* Given */
    unsigned off; /* defences switched off (TICKETD_DEFENSES) */
    enum local local;
    enum under_key under_key;
    enum token token;
    int begin_rc, lock_rc, token_rc, alive_rc, take_over_rc, complete_rc, release_rc; /* Redis */
    int create_rc, find_rc; /* MySQL; store_order_create answers create_rc from then on */
    int deadlocks;          /* ... after this many deadlocks (TD_ERETRY) */
    int find_conflicts;     /* the look-up's conflicts (TD_ERETRY) before find_rc */
    enum found found;
    int tries;         /* transaction attempts allowed (tx_retries + 1); 0: three */
    bool strict;       /* TICKETD_REDIS_POLICY=strict */
    int user_delta;    /* the request's user, from USER */
    int session_delta; /* the request's session, from SESSION */
    /* Then */
    enum order_outcome outcome;
    const char *layer; /* the defence that answered; NULL: none did */
    int status;        /* 0: not looked at */
    const char *body;  /* NULL: ORDER_CREATED's own order, otherwise none */
    const char *calls; /* the port calls, in order */
    enum cached cached;
    enum claims claims;
    enum recorded recorded;
    struct count counts[2];
    void (*then)(const struct order_result *res); /* the row's own checks */
};

/* The settings and the application every row runs with; rows_setup()
 * sets them to the defaults, with every defence on. */
extern struct config rows_cfg;
extern struct app rows_app;
/* The API layer's renderers, reduced to what the tests look at. */
extern const struct order_render rows_render;

/* What the step boot.c chooses with forget-failures off was handed. */
struct rows_failure_step {
    int calls;
    enum order_outcome outcome;
    bool held;
};
extern struct rows_failure_step rows_failure_step;

int rows_setup(void **state);
int rows_teardown(void **state);
/* How far a metric moved since rows_setup(). */
int64_t rows_delta(enum metric m);
/* The port calls made, in order, are want. */
void rows_assert_calls(const char *want);
/* Does the in-process response cache hold an answer for the rows' key? */
bool rows_locally_cached(char *body_out, size_t cap);

/* Runs own (tests of their own, with their own setup) and then each row,
 * as one cmocka group; returns the number that failed. */
int rows_run(const char *group, const struct CMUnitTest *own, size_t nown,
             const struct order_case *rows, size_t nrows);

#endif
