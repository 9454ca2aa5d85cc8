/* test_orders.c - the decisions of orders_create(), layer by layer, against
 * fake ports (fakes.h): which defence answers, which port calls it makes,
 * and what it gives back when a request fails after claiming something.
 *
 * Each case is a row of a table: the defences switched off, what the fakes
 * hold and answer, and what orders_create() must do. One runner plays every
 * row as a cmocka test of its own, named by the row, so a broken defence
 * shows as the rows that describe it. What only one row asserts lives in
 * that row's `then` function. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fakes.h"

#include "app.h"
#include "config.h"
#include "defences.h"
#include "err.h"
#include "idem.h"
#include "log.h"
#include "metrics.h"
#include "inflight_key.h"
#include "order_steps.h"
#include "orders.h"
#include "ordertoken.h"
#include "respcache.h"
#include "unique_index.h"
#include "util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define USER    42
#define KEY     "key-1"
#define SESSION 7
#define QTY     2
#define TOKEN   "tok-abc"

static struct config cfg;
static struct app app;

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

static int setup(void **state)
{
    (void)state; /* the row, set by cmocka: left as it is */
    config_defaults(&cfg);
    cfg.tx_retries = 2;
    app = (struct app){.cfg = &cfg, .defences = DEFENCES_ALL, .respcache = respcache_new(64)};
    snprintf(app.instance, sizeof app.instance, "%s", OUR_INSTANCE);
    fakes_reset();
    fake_metrics_mark();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    respcache_free(app.respcache);
    app.respcache = NULL;
    config_cleanup(&cfg);
    return 0;
}

static int64_t delta(enum metric m)
{
    return fake_metrics_delta(m);
}

/* The API layer's renderers, reduced to what the tests look at. */
static char *render_order(const struct order *o, int *status, size_t *len)
{
    *status = 201;
    char *s = xasprintf("{\"order_no\":\"%s\",\"session_id\":%lld,\"quantity\":%lld}", o->order_no,
                        (long long)o->session_id, (long long)o->quantity);
    *len = strlen(s);
    return s;
}

static char *render_failure(enum order_outcome oc, int *status, size_t *len)
{
    *status = oc == ORDER_SOLD_OUT ? 409 : 503;
    char *s = xasprintf("{\"failure\":%d}", (int)oc);
    *len = strlen(s);
    return s;
}

static const struct order_render render = {render_order, render_failure};

static void assert_calls(const char *want)
{
    if (strcmp(fake_calls, want) != 0)
        fail_msg("port calls\n   were: %s\n   want: %s", fake_calls, want);
}

static bool locally_cached(char *body_out, size_t cap)
{
    struct cached_response r;
    bool hit = respcache_get(app.respcache, USER, KEY, mono_ms(), &r);
    if (hit && body_out != NULL)
        snprintf(body_out, cap, "%s", r.body);
    free(r.body);
    return hit;
}

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

/* The step boot.c puts in the table with forget-failures off stands in
 * for the naive one (order_naive.h, which the domain's tests do not link):
 * the flow must hand it the failure and the key, still held, in place of
 * giving the key back itself. */
static struct {
    int calls;
    enum order_outcome outcome;
    bool held;
} failure_step;

static void end_failure_step(struct app *a, const struct order_request *rq, struct inflight_key *k,
                             const struct order_render *r, const struct order_result *res)
{
    (void)a, (void)rq, (void)r;
    failure_step.calls++;
    failure_step.outcome = res->outcome;
    failure_step.held = inflight_key_holds(k);
}

static const char *no_token_record(const struct app *a, const char *token, char *key)
{
    (void)a, (void)token, (void)key;
    return NULL;
}

/* As boot.c chooses the naive steps for the defences switched off, with
 * stand-ins of the same effect on the flow. */
static struct order_steps chosen_steps;

static void choose_steps(unsigned off)
{
    chosen_steps = (struct order_steps){0};
    if (off & DEFENCE_FORGET_FAILURES)
        chosen_steps.end_failure = end_failure_step;
    if (off & DEFENCE_TOKEN_ATOMIC)
        chosen_steps.token_to_record = no_token_record;
    if (off & DEFENCE_UNIQUE_INDEX)
        chosen_steps.copy_found_by = LAYER_CHECK_THEN_INSERT;
    app.order_steps = &chosen_steps;
    memset(&failure_step, 0, sizeof failure_step);
}

/* --- the runner ---------------------------------------------------------- */

static void record_under_key(const struct order_case *c)
{
    char fp[IDEM_FP_LEN + 1];
    char *rec = NULL;
    switch (c->under_key) {
    case KEY_EMPTY:
        return;
    case KEY_DONE:
    case KEY_DONE_OTHER_QTY:
        idem_fingerprint_order(SESSION, c->under_key == KEY_DONE ? QTY : QTY + 1, fp);
        rec = idem_done(fp, 201, REDIS_BODY, strlen(REDIS_BODY));
        break;
    case KEY_MARKER:
    case KEY_MARKER_OTHER_SESSION:
        idem_fingerprint_order(c->under_key == KEY_MARKER ? SESSION : SESSION + 1, QTY, fp);
        rec = idem_marker(fp, OTHER_INSTANCE "0123456789abcdef");
        break;
    case KEY_MARKER_OURS:
        idem_fingerprint_order(SESSION, QTY, fp);
        rec = idem_marker(fp, OUR_INSTANCE "0123456789abcdef");
        break;
    case KEY_GARBAGE:
        rec = xasprintf("not a record");
        break;
    }
    fake_cache.idem_begin_rc = TD_EDUP;
    snprintf(fake_cache.existing, sizeof fake_cache.existing, "%s", rec);
    free(rec);
}

static void cache_locally(const struct order_case *c)
{
    char fp[IDEM_FP_LEN + 1];
    if (c->local == LOCAL_OFF) {
        /* TICKETD_RESPCACHE_ENTRIES=0 */
        respcache_free(app.respcache);
        app.respcache = NULL;
        return;
    }
    if (c->local == LOCAL_NONE)
        return;
    idem_fingerprint_order(SESSION, c->local == LOCAL_SAME ? QTY : QTY + 1, fp);
    respcache_put(app.respcache, USER, KEY, fp, 201, LOCAL_BODY, strlen(LOCAL_BODY), mono_ms(),
                  mono_ms() + 60000);
}

static void found_in_database(const struct order_case *c)
{
    if (c->find_rc != TD_OK)
        fake_store.find_rc = c->find_rc;
    if (c->found == FOUND_NONE)
        return;
    fake_store.find_rc = TD_OK;
    fake_store.found = (struct order){
        .id = 9,
        .order_no = FOUND_NO,
        .user_id = USER,
        .session_id = SESSION + (c->found == FOUND_OTHER_SESSION),
        .request_id = KEY,
        .quantity = QTY + (c->found == FOUND_OTHER_QTY),
    };
}

/* Sets the fakes, the settings and the request as the row says. token
 * must hold ORDERTOKEN_MAX + 1 bytes. */
static struct order_request given(const struct order_case *c, char *token)
{
    app.defences = DEFENCES_ALL & ~c->off;
    choose_steps(c->off);
    cfg.redis_policy = c->strict ? REDIS_POLICY_STRICT : REDIS_POLICY_DEGRADE;
    if (c->tries > 0)
        cfg.tx_retries = c->tries - 1;
    cache_locally(c);
    record_under_key(c);
    if (c->begin_rc != TD_OK)
        fake_cache.idem_begin_rc = c->begin_rc;
    fake_cache.lock_rc = c->lock_rc;
    fake_cache.token_rc = c->token_rc;
    fake_cache.alive_rc = c->alive_rc;
    fake_cache.take_over_rc = c->take_over_rc;
    fake_cache.complete_rc = c->complete_rc;
    fake_cache.release_rc = c->release_rc;
    fake_store.ncreate_rc = 0;
    for (int i = 0; i < c->deadlocks; i++)
        fake_store.create_rc[fake_store.ncreate_rc++] = TD_ERETRY;
    if (c->create_rc != TD_OK || c->deadlocks > 0)
        fake_store.create_rc[fake_store.ncreate_rc++] = c->create_rc;
    found_in_database(c);

    struct order_request rq = {.user_id = USER + c->user_delta,
                               .key = KEY,
                               .session_id = SESSION + c->session_delta,
                               .quantity = QTY,
                               .token = TOKEN};
    switch (c->token) {
    case TOK_PLAIN:
        break;
    case TOK_NONE:
        rq.token = NULL;
        break;
    case TOK_SIGNED:
    case TOK_EXPIRED:
    case TOK_OTHER_USER:
        ordertoken_new(cfg.jwt_secret, USER + (c->token == TOK_OTHER_USER),
                       wall_s() + (c->token == TOK_EXPIRED ? -1 : 600), token);
        rq.token = token;
        break;
    }
    return rq;
}

/* The body of a new order is the renderer's, of the last order the store
 * made. */
static void assert_new_order_body(const struct order_result *res, int64_t session)
{
    char want[128];
    assert_true(fake_store.create_calls > 0);
    snprintf(want, sizeof want, "{\"order_no\":\"%s\",\"session_id\":%lld,\"quantity\":%d}",
             fake_store.order_nos[fake_store.create_calls - 1], (long long)session, QTY);
    assert_non_null(res->body);
    assert_string_equal(res->body, want);
    assert_int_equal(res->body_len, strlen(want));
}

/* The marker and lock owner a completion or release names are the ones
 * this request set. When the key step failed, the fake recorded none of
 * them: what the script may have set is then named all the same. */
static void assert_ours(const struct fake_str *marker, const struct fake_str *owner)
{
    assert_false(marker->null);
    assert_false(owner->null);
    if (fake_cache.idem_begin.marker[0] != '\0')
        assert_string_equal(marker->s, fake_cache.idem_begin.marker);
    if (fake_cache.lock.owner[0] != '\0')
        assert_string_equal(owner->s, fake_cache.lock.owner);
}

static void assert_claims(enum claims claims, const struct order_result *res)
{
    switch (claims) {
    case CLAIMS_ANY:
        break;
    case CLAIMS_KEPT:
        assert_int_equal(fake_cache.release.calls, 0);
        break;
    case CLAIMS_RELEASED:
        /* Every failure after the marker and the lock were taken gives
         * both back, answers without a body, and remembers nothing. */
        assert_null(res->body);
        assert_int_equal(fake_cache.complete.calls, 0);
        assert_int_equal(fake_cache.release.calls, 1);
        assert_ours(&fake_cache.release.marker, &fake_cache.release.owner);
        assert_false(locally_cached(NULL, 0));
        break;
    case CLAIMS_COMPLETED:
        assert_int_equal(fake_cache.complete.calls, 1);
        assert_int_equal(fake_cache.release.calls, 0);
        assert_ours(&fake_cache.complete.marker, &fake_cache.complete.owner);
        break;
    }
}

static void assert_cached(enum cached cached, const struct order_result *res)
{
    char body[256];
    if (cached == CACHED) {
        /* The next retry does not reach Redis: it gets this very answer. */
        assert_true(locally_cached(body, sizeof body));
        assert_non_null(res->body);
        assert_string_equal(body, res->body);
    } else if (cached == NOT_CACHED) {
        assert_false(locally_cached(NULL, 0));
    }
}

static void assert_recorded(enum recorded recorded, const struct order_request *rq)
{
    char want[ORDERTOKEN_KEY_LEN + 1];
    if (recorded == RECORDED_ANY)
        return;
    assert_true(fake_store.create_calls > 0);
    if (recorded == RECORDED_NONE) {
        assert_true(fake_store.draft.token_key.null);
        return;
    }
    /* The hash of the token, never the token itself. */
    ordertoken_key(rq->token, want);
    assert_false(fake_store.draft.token_key.null);
    assert_string_equal(fake_store.draft.token_key.s, want);
    assert_null(strstr(fake_store.draft.token_key.s, rq->token));
}

static void run_row(void **state)
{
    const struct order_case *c = *state;
    char token[ORDERTOKEN_MAX + 1];
    struct order_request rq = given(c, token);
    struct order_result res;

    orders_create(&app, &rq, &render, &res);

    if (res.outcome != c->outcome)
        fail_msg("outcome %d, want %d", res.outcome, c->outcome);
    if (c->layer == NULL)
        assert_null(order_layer_name(res.layer));
    else
        assert_string_equal(order_layer_name(res.layer), c->layer);
    if (c->status != 0)
        assert_int_equal(res.status, c->status);
    if (c->body != NULL) {
        assert_non_null(res.body);
        assert_string_equal(res.body, c->body);
        assert_int_equal(res.body_len, strlen(c->body));
    } else if (c->outcome == ORDER_CREATED) {
        assert_new_order_body(&res, rq.session_id);
    } else {
        assert_null(res.body);
    }
    assert_calls(c->calls);
    assert_cached(c->cached, &res);
    assert_claims(c->claims, &res);
    assert_recorded(c->recorded, &rq);
    for (size_t i = 0; i < sizeof c->counts / sizeof c->counts[0]; i++) {
        if (c->counts[i].on && delta(c->counts[i].m) != c->counts[i].n)
            fail_msg("metric %d moved by %lld, want %lld", c->counts[i].m,
                     (long long)delta(c->counts[i].m), (long long)c->counts[i].n);
    }
    if (c->then != NULL)
        c->then(&res);
    order_result_cleanup(&res);
}

/* --- what only one row looks at ------------------------------------------ */

static void then_success(const struct order_result *res)
{
    char fp[IDEM_FP_LEN + 1];
    struct idem_record rec;
    idem_fingerprint_order(SESSION, QTY, fp);

    /* Layers 1-2: one SET NX under the user's key, our marker inside. */
    assert_int_equal(fake_cache.idem_begin.user_id, USER);
    assert_string_equal(fake_cache.idem_begin.key, KEY);
    assert_int_equal(fake_cache.idem_begin.ttl_ms, cfg.inflight_ttl_ms);
    const char *marker = fake_cache.idem_begin.marker;
    assert_true(idem_parse(marker, strlen(marker), &rec));
    assert_false(rec.done);
    assert_string_equal(rec.fingerprint, fp);

    /* Layer 3: the lock of this user and session, owned by the same random
     * owner as the marker, so each is released only by this request. */
    assert_int_equal(fake_cache.lock.user_id, USER);
    assert_int_equal(fake_cache.lock.session_id, SESSION);
    assert_int_equal(fake_cache.lock.ttl_ms, cfg.lock_ttl_ms);
    assert_int_equal(strlen(fake_cache.lock.owner), IDEM_OWNER_LEN);
    assert_string_equal(marker + strlen(marker) - IDEM_OWNER_LEN, fake_cache.lock.owner);

    /* Layer 4: the token, spent as this user, in the key's own script: one
     * round trip to Redis before the database. */
    assert_int_equal(fake_cache.token_take.user_id, USER);
    assert_string_equal(fake_cache.token_take.token, TOKEN);
    assert_true(fake_cache.token_take.in_begin);

    /* Layers 5-6: one draft, with the key as request_id. */
    assert_int_equal(fake_store.create_calls, 1);
    assert_int_equal(fake_store.draft.user_id, USER);
    assert_int_equal(fake_store.draft.session_id, SESSION);
    assert_int_equal(fake_store.draft.quantity, QTY);
    assert_string_equal(fake_store.draft.request_id, KEY);

    /* Step 7: the marker becomes the completed record and the lock goes,
     * in one call, both only if still ours. */
    assert_int_equal(fake_cache.complete.user_id, USER);
    assert_string_equal(fake_cache.complete.key, KEY);
    assert_int_equal(fake_cache.complete.session_id, SESSION);
    assert_int_equal(fake_cache.complete.ttl_s, cfg.idem_ttl_s);
    const char *record = fake_cache.complete.record;
    assert_true(idem_parse(record, strlen(record), &rec));
    assert_true(rec.done);
    assert_string_equal(rec.fingerprint, fp);
    assert_int_equal(rec.status, 201);
    assert_int_equal(rec.body_len, res->body_len);
    assert_memory_equal(rec.body, res->body, res->body_len);
}

static void then_alive_asked(const struct order_result *res)
{
    (void)res;
    /* The marker belongs to the first request, whose process still beats:
     * deleting it here would let a third copy through while the first
     * still runs. */
    assert_string_equal(fake_cache.alive_asked, OTHER_INSTANCE);
}

static void then_taken_over(const struct order_result *res)
{
    (void)res;
    /* Nobody will finish or release that marker: the retry takes it (and
     * its lock) over, and completes under what it took. */
    assert_string_equal(fake_cache.take_over.stale, fake_cache.existing);
    assert_string_equal(fake_cache.take_over.stale_owner, OTHER_INSTANCE "0123456789abcdef");
    assert_false(fake_cache.take_over.owner.null);
    assert_memory_equal(fake_cache.take_over.owner.s, OUR_INSTANCE, IDEM_INSTANCE_LEN);
    assert_string_equal(fake_cache.complete.marker.s, fake_cache.take_over.marker);
    assert_string_equal(fake_cache.complete.owner.s, fake_cache.take_over.owner.s);
}

static void then_no_marker_claimed(const struct order_result *res)
{
    (void)res;
    /* The key holds someone else's text, not our marker: the completion
     * must not claim a marker it never set. */
    assert_true(fake_cache.complete.marker.null);
    assert_false(fake_cache.complete.owner.null);
}

static void then_lock_not_ours(const struct order_result *res)
{
    (void)res;
    /* The script itself takes our marker back (so the key can be retried);
     * the lock is someone else's and stays: nothing to release. */
    assert_true(fake_cache.idem_begin.marker[0] != '\0');
    assert_int_equal(fake_cache.lock.calls, 1);
}

static void then_token_spent_for_key(const struct order_result *res)
{
    (void)res;
    /* The token is spent on behalf of this key: its retries may bring it.
     * Both the marker and the lock are ours and both go. */
    assert_string_equal(fake_cache.token_take.key, KEY);
    assert_int_equal(fake_cache.release.session_id, SESSION);
}

static void then_looked_up_the_key(const struct order_result *res)
{
    struct idem_record rec;
    assert_int_equal(fake_store.find.user_id, USER);
    assert_string_equal(fake_store.find.request_id, KEY);
    /* Remembered like a success, so the next retry stops at layer 1. */
    const char *record = fake_cache.complete.record;
    assert_true(idem_parse(record, strlen(record), &rec));
    assert_true(rec.done);
    assert_memory_equal(rec.body, res->body, res->body_len);
}

/* A token the database refused: the key's own order was looked for
 * before the refusal was given, and nothing was remembered. */
static void then_key_asked_first(const struct order_result *res)
{
    (void)res;
    assert_int_equal(fake_store.find_calls, 1);
    assert_int_equal(fake_store.find.user_id, USER);
    assert_string_equal(fake_store.find.request_id, KEY);
    assert_int_equal(fake_cache.complete.calls, 0);
}

static void then_new_number_each_try(const struct order_result *res)
{
    (void)res;
    /* Each attempt is a new transaction with a new order number. */
    assert_string_not_equal(fake_store.order_nos[0], fake_store.order_nos[1]);
}

static void then_nothing_kept_in_process(const struct order_result *res)
{
    (void)res;
    assert_int_equal(respcache_size(app.respcache), 0);
}

static void then_no_marker_set(const struct order_result *res)
{
    (void)res;
    /* The lookup still runs for the response cache, but sets no marker,
     * so a concurrent copy is not stopped by one. */
    assert_string_equal(fake_cache.idem_begin.marker, "");
    assert_true(fake_cache.complete.marker.null);
}

static void then_no_marker_completed(const struct order_result *res)
{
    (void)res;
    assert_true(fake_cache.complete.marker.null);
}

/* With no marker and no lock to hand back, the answer is still stored in
 * Redis for the key's retries (the Redis half of the response cache). */
static void then_stored_without_claims(const struct order_result *res)
{
    assert_int_equal(fake_cache.complete.calls, 1);
    assert_true(fake_cache.complete.marker.null);
    assert_true(fake_cache.complete.owner.null);
    assert_non_null(strstr(fake_cache.complete.record, res->body));
}

/* The naive remembering of a failure: the API layer's failure body, kept
 * under the key like a success (in Redis and in process). */
static void then_failure_handed_over(const struct order_result *res)
{
    (void)res;
    assert_int_equal(failure_step.calls, 1);
    assert_int_equal(failure_step.outcome, ORDER_SOLD_OUT);
    assert_true(failure_step.held);
    assert_int_equal(fake_cache.release.calls, 0);
}

static void then_no_lock_completed(const struct order_result *res)
{
    (void)res;
    assert_true(fake_cache.complete.owner.null);
}

/* --- the table ------------------------------------------------------------ */

#define ALIVE_THEN_DB "order_begin instance_alive order_find_request"
/* The token refused: marker and lock are ours, given back unless the
 * database has the order. */
#define TOKEN_THEN_DB     "order_begin order_find_request order_release"
#define TAKE_OVER_THEN_DB "order_begin instance_alive order_take_over order_find_request"

static const struct order_case cases[] = {
    /* success */
    {"success: every layer passes, one order", .outcome = ORDER_CREATED, .status = 201,
     .calls = FULL_PATH, .cached = CACHED, .claims = CLAIMS_COMPLETED, .recorded = RECORDED_SENT,
     .counts = {COUNTS(M_ORDERS_CREATED, 1), COUNTS(M_REDIS_DEGRADED, 0)}, .then = then_success},

    /* layer 1: the response cache; answered before any port is asked,
     * the token included */
    {"local cache replays", .local = LOCAL_SAME, .outcome = ORDER_REPLAYED,
     .layer = "response-cache", .status = 201, .body = LOCAL_BODY, .calls = "",
     .counts = {COUNTS(M_DUP_RESPONSE_CACHE, 1)}},
    {"local cache: another quantity is another payload", .local = LOCAL_OTHER_QTY,
     .outcome = ORDER_KEY_REUSED, .layer = "response-cache", .calls = "",
     .counts = {COUNTS(M_DUP_KEY_REUSED, 1)}},
    {"local cache: another session is another payload", .local = LOCAL_SAME, .session_delta = 1,
     .outcome = ORDER_KEY_REUSED, .layer = "response-cache", .calls = ""},
    {"local cache is per user", .local = LOCAL_SAME, .user_delta = 1, .outcome = ORDER_CREATED,
     .calls = FULL_PATH},
    {"no local cache: Redis is asked", .local = LOCAL_OFF, .outcome = ORDER_CREATED,
     .calls = FULL_PATH},
    /* No lock, no token, no database; nothing released, since the record
     * under the key is not this request's; copied in-process. */
    {"Redis record replays", .under_key = KEY_DONE, .outcome = ORDER_REPLAYED,
     .layer = "response-cache", .status = 201, .body = REDIS_BODY, .calls = "order_begin",
     .cached = CACHED, .claims = CLAIMS_KEPT, .counts = {COUNTS(M_DUP_RESPONSE_CACHE, 1)}},
    {"Redis record of another payload", .under_key = KEY_DONE_OTHER_QTY,
     .outcome = ORDER_KEY_REUSED, .layer = "response-cache", .calls = "order_begin",
     .cached = NOT_CACHED, .counts = {COUNTS(M_DUP_KEY_REUSED, 1)}},

    /* layer 2: the in-flight key; a refusal is checked against the
     * database first (no order under the key here, so it stands) */
    {"in flight, same payload", .under_key = KEY_MARKER, .outcome = ORDER_IN_PROGRESS,
     .layer = "inflight-key", .calls = ALIVE_THEN_DB, .counts = {COUNTS(M_DUP_INFLIGHT_KEY, 1)},
     .then = then_alive_asked},
    {"in flight of a dead process: taken over", .under_key = KEY_MARKER, .alive_rc = TD_ENOTFOUND,
     .outcome = ORDER_CREATED,
     .calls = "order_begin instance_alive order_take_over token_take order_create order_complete",
     .counts = {COUNTS(M_INFLIGHT_TAKEOVERS, 1), COUNTS(M_DUP_INFLIGHT_KEY, 0)},
     .then = then_taken_over},
    {"in flight, Redis cannot tell if its process lives: it stands", .under_key = KEY_MARKER,
     .alive_rc = TD_EUNAVAIL, .outcome = ORDER_IN_PROGRESS, .layer = "inflight-key",
     .calls = ALIVE_THEN_DB},
    {"in flight, taken by someone else meanwhile", .under_key = KEY_MARKER,
     .alive_rc = TD_ENOTFOUND, .take_over_rc = TD_EDUP, .outcome = ORDER_IN_PROGRESS,
     .layer = "inflight-key", .calls = TAKE_OVER_THEN_DB},
    {"in flight, another key holds the session now", .under_key = KEY_MARKER,
     .alive_rc = TD_ENOTFOUND, .take_over_rc = TD_ECONFLICT, .outcome = ORDER_DUPLICATE_SUBMISSION,
     .layer = "session-lock", .calls = TAKE_OVER_THEN_DB},
    /* This process is alive by definition: no question asked. */
    {"own marker is never taken over", .under_key = KEY_MARKER_OURS, .alive_rc = TD_ENOTFOUND,
     .outcome = ORDER_IN_PROGRESS, .layer = "inflight-key",
     .calls = "order_begin order_find_request"},
    {"in flight, another payload", .under_key = KEY_MARKER_OTHER_SESSION,
     .outcome = ORDER_KEY_REUSED, .layer = "inflight-key", .calls = "order_begin",
     .counts = {COUNTS(M_DUP_KEY_REUSED, 1)}},
    /* Garbage under the key is no answer: the database decides. */
    {"malformed record is ignored", .under_key = KEY_GARBAGE, .outcome = ORDER_CREATED,
     .calls = LOCK_APART, .then = then_no_marker_claimed},

    /* layers 3 and 4: session lock and token */
    {"session lock taken", .lock_rc = TD_ECONFLICT, .outcome = ORDER_DUPLICATE_SUBMISSION,
     .layer = "session-lock", .calls = "order_begin order_find_request", .claims = CLAIMS_KEPT,
     .counts = {COUNTS(M_DUP_SESSION_LOCK, 1)}, .then = then_lock_not_ours},
    {"token invalid", .token_rc = TD_ENOTFOUND, .outcome = ORDER_TOKEN_INVALID, .layer = "token",
     .calls = TOKEN_THEN_DB, .claims = CLAIMS_RELEASED, .counts = {COUNTS(M_DUP_TOKEN, 1)},
     .then = then_token_spent_for_key},

    /* A Redis refusal is checked against the database: Redis may have
     * forgotten, or the instance that placed the order died before storing
     * its answer. */
    {"marker refused, database has the order: replayed", .under_key = KEY_MARKER,
     .found = FOUND_SAME, .outcome = ORDER_REPLAYED, .layer = "unique-index", .status = 201,
     .body = FOUND_BODY, .calls = ALIVE_THEN_DB, .cached = CACHED, .claims = CLAIMS_KEPT,
     .counts = {COUNTS(M_DUP_UNIQUE_INDEX, 1)}},
    {"lock refused, database has the order: replayed", .lock_rc = TD_ECONFLICT, .found = FOUND_SAME,
     .outcome = ORDER_REPLAYED, .layer = "unique-index", .status = 201, .body = FOUND_BODY,
     .calls = "order_begin order_find_request", .cached = CACHED, .claims = CLAIMS_KEPT,
     .counts = {COUNTS(M_DUP_UNIQUE_INDEX, 1)}},
    /* Marker and lock are ours here: the answer is stored under them. */
    {"token refused, database has the order: replayed", .token_rc = TD_ENOTFOUND,
     .found = FOUND_SAME, .outcome = ORDER_REPLAYED, .layer = "unique-index", .status = 201,
     .body = FOUND_BODY, .calls = "order_begin order_find_request order_complete", .cached = CACHED,
     .claims = CLAIMS_KEPT, .counts = {COUNTS(M_DUP_UNIQUE_INDEX, 1)}},
    {"marker refused, database has another payload", .under_key = KEY_MARKER,
     .found = FOUND_OTHER_QTY, .outcome = ORDER_KEY_REUSED, .layer = "unique-index",
     .calls = ALIVE_THEN_DB, .cached = NOT_CACHED},
    {"lock refused, database has another payload", .lock_rc = TD_ECONFLICT,
     .found = FOUND_OTHER_QTY, .outcome = ORDER_KEY_REUSED, .layer = "unique-index",
     .calls = "order_begin order_find_request", .cached = NOT_CACHED},
    {"token refused, database has another payload", .token_rc = TD_ENOTFOUND,
     .found = FOUND_OTHER_QTY, .outcome = ORDER_KEY_REUSED, .layer = "unique-index",
     .calls = TOKEN_THEN_DB, .cached = NOT_CACHED},
    /* Without the database the refusal cannot be checked: "try again" is
     * true, "your token is invalid" might not be. */
    {"marker refused, database down", .under_key = KEY_MARKER, .find_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE, .calls = ALIVE_THEN_DB},
    {"lock refused, database down", .lock_rc = TD_ECONFLICT, .find_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE, .calls = "order_begin order_find_request"},
    {"token refused, database down", .token_rc = TD_ENOTFOUND, .find_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE, .calls = TOKEN_THEN_DB},

    /* Issued by us to this user, unexpired, and unknown to Redis: Redis
     * lost it. The request goes on; the database decides. */
    {"signed token Redis forgot", .token = TOK_SIGNED, .token_rc = TD_ENOTFOUND,
     .outcome = ORDER_CREATED, .calls = FULL_PATH, .recorded = RECORDED_SENT,
     .counts = {COUNTS(M_TOKEN_FORGOTTEN, 1)}},
    /* ... and the database remembers that another key's order spent it:
     * refused, rolled back, and checked against the key's own order. */
    {"signed token Redis forgot, spent by another key's order", .token = TOK_SIGNED,
     .token_rc = TD_ENOTFOUND, .create_rc = TD_ESPENT, .outcome = ORDER_TOKEN_INVALID,
     .layer = "unique-index", .calls = "order_begin order_create order_find_request order_release",
     .cached = NOT_CACHED, .claims = CLAIMS_RELEASED, .recorded = RECORDED_SENT,
     .counts = {COUNTS(M_DUP_UNIQUE_INDEX, 1), COUNTS(M_ORDERS_CREATED, 0)},
     .then = then_key_asked_first},
    /* The key's own order (a copy that met its own token): replayed. */
    {"token spent, and this key has its order: replayed", .token = TOK_SIGNED,
     .token_rc = TD_ENOTFOUND, .create_rc = TD_ESPENT, .found = FOUND_SAME,
     .outcome = ORDER_REPLAYED, .layer = "unique-index", .status = 201, .body = FOUND_BODY,
     .calls = "order_begin order_create order_find_request order_complete", .cached = CACHED,
     .claims = CLAIMS_COMPLETED, .counts = {COUNTS(M_DUP_UNIQUE_INDEX, 1)}},
    {"token spent, the key's order cannot be looked up", .token = TOK_SIGNED,
     .token_rc = TD_ENOTFOUND, .create_rc = TD_ESPENT, .find_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_create order_find_request order_release",
     .claims = CLAIMS_RELEASED},
    /* Redis down (degrade) checks no token; the database still refuses a
     * spent one. */
    {"degrade: a token spent in the database", .begin_rc = TD_EUNAVAIL, .create_rc = TD_ESPENT,
     .outcome = ORDER_TOKEN_INVALID, .layer = "unique-index", .recorded = RECORDED_SENT,
     .calls = "order_begin order_create order_find_request order_release"},
    /* Only a token that bought nothing may come again: a deadlock retried
     * records the same token, and never a sold-out one's key twice. */
    {"deadlock retried: the token recorded with the order", .deadlocks = 1, .token = TOK_SIGNED,
     .token_rc = TD_ENOTFOUND, .outcome = ORDER_CREATED, .recorded = RECORDED_SENT,
     .calls = "order_begin order_create order_create order_complete"},
    {"signed token spent by another key", .token = TOK_SIGNED, .token_rc = TD_ECONFLICT,
     .outcome = ORDER_TOKEN_INVALID, .layer = "token", .calls = TOKEN_THEN_DB},
    {"signed token, expired", .token = TOK_EXPIRED, .token_rc = TD_ENOTFOUND,
     .outcome = ORDER_TOKEN_INVALID, .layer = "token", .calls = TOKEN_THEN_DB},
    {"signed token of another user", .token = TOK_OTHER_USER, .token_rc = TD_ENOTFOUND,
     .outcome = ORDER_TOKEN_INVALID, .layer = "token", .calls = TOKEN_THEN_DB},
    /* TICKETD_ORDER_TOKEN_REQUIRED=0: the API passes no token. */
    {"no token sent", .token = TOK_NONE, .token_rc = TD_ENOTFOUND, .outcome = ORDER_CREATED,
     .calls = FULL_PATH, .recorded = RECORDED_NONE},

    /* layers 5 and 6: the database. The token was spent before the stock
     * ran out, as the contract says. */
    {"sold out", .create_rc = TD_ECONFLICT, .outcome = ORDER_SOLD_OUT,
     .calls = "order_begin order_create order_release", .claims = CLAIMS_RELEASED,
     .counts = {COUNTS(M_STOCK_CONFLICTS, 1), COUNTS(M_ORDERS_CREATED, 0)}},
    {"unknown session", .create_rc = TD_ENOTFOUND, .outcome = ORDER_SESSION_NOT_FOUND,
     .calls = "order_begin order_create order_release", .claims = CLAIMS_RELEASED},
    /* The first order, not a new one. */
    {"unique index replays", .create_rc = TD_EDUP, .found = FOUND_SAME, .outcome = ORDER_REPLAYED,
     .layer = "unique-index", .status = 201, .body = FOUND_BODY,
     .calls = "order_begin order_create order_find_request order_complete", .cached = CACHED,
     .claims = CLAIMS_COMPLETED,
     .counts = {COUNTS(M_DUP_UNIQUE_INDEX, 1), COUNTS(M_ORDERS_CREATED, 0)},
     .then = then_looked_up_the_key},
    {"unique index: another quantity", .create_rc = TD_EDUP, .found = FOUND_OTHER_QTY,
     .outcome = ORDER_KEY_REUSED, .layer = "unique-index",
     .calls = "order_begin order_create order_find_request order_release",
     .claims = CLAIMS_RELEASED, .counts = {COUNTS(M_DUP_KEY_REUSED, 1)}},
    {"unique index: another session", .create_rc = TD_EDUP, .found = FOUND_OTHER_SESSION,
     .outcome = ORDER_KEY_REUSED, .layer = "unique-index",
     .calls = "order_begin order_create order_find_request order_release",
     .claims = CLAIMS_RELEASED},
    {"unique index, lookup unavailable", .create_rc = TD_EDUP, .find_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_create order_find_request order_release",
     .claims = CLAIMS_RELEASED},
    {"unique index, lookup finds nothing", .create_rc = TD_EDUP, .find_rc = TD_ENOTFOUND,
     .outcome = ORDER_FAILED, .calls = "order_begin order_create order_find_request order_release",
     .claims = CLAIMS_RELEASED},
    {"unique index, lookup fails", .create_rc = TD_EDUP, .find_rc = TD_EINTERNAL,
     .outcome = ORDER_FAILED, .calls = "order_begin order_create order_find_request order_release",
     .claims = CLAIMS_RELEASED},
    /* The fake store notes no cause of its retries: they count as "other". */
    {"deadlock retried, then created", .deadlocks = 1, .outcome = ORDER_CREATED,
     .calls = "order_begin order_create order_create order_complete",
     .counts = {COUNTS(M_TX_RETRIES_OTHER, 1)}, .then = then_new_number_each_try},
    /* The first try and tx_retries more, then a dependency error. */
    {"deadlock, no retries allowed", .create_rc = TD_ERETRY, .tries = 1,
     .outcome = ORDER_UNAVAILABLE, .calls = "order_begin order_create order_release",
     .claims = CLAIMS_RELEASED, .counts = {COUNTS(M_TX_RETRIES_OTHER, 0)}},
    {"deadlock, one retry", .create_rc = TD_ERETRY, .tries = 2, .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_create order_create order_release", .claims = CLAIMS_RELEASED,
     .counts = {COUNTS(M_TX_RETRIES_OTHER, 1)}},
    {"deadlock, two retries", .create_rc = TD_ERETRY, .tries = 3, .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_create order_create order_create order_release",
     .claims = CLAIMS_RELEASED, .counts = {COUNTS(M_TX_RETRIES_OTHER, 2)}},
    {"deadlock, three retries", .create_rc = TD_ERETRY, .tries = 4, .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_create order_create order_create order_create order_release",
     .claims = CLAIMS_RELEASED, .counts = {COUNTS(M_TX_RETRIES_OTHER, 3)}},
    /* Only deadlocks are retried. */
    {"store unavailable", .create_rc = TD_EUNAVAIL, .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_create order_release", .claims = CLAIMS_RELEASED},
    {"store internal error", .create_rc = TD_EINTERNAL, .outcome = ORDER_FAILED,
     .calls = "order_begin order_create order_release", .claims = CLAIMS_RELEASED},
    {"store refuses the input", .create_rc = TD_EINVAL, .outcome = ORDER_FAILED,
     .calls = "order_begin order_create order_release", .claims = CLAIMS_RELEASED},

    /* Redis failing. degrade: the rest of Redis (and the token) is
     * skipped, the database decides, and what was already claimed is
     * finished normally; the in-process cache does not depend on Redis.
     * The key step, the lock and the token run in one script: when it
     * fails, what it may have set is treated as ours and handed back
     * (compare-and-delete). No defence answered: a dependency did. */
    {"degrade: key step unavailable", .begin_rc = TD_EUNAVAIL, .outcome = ORDER_CREATED,
     .status = 201, .calls = FULL_PATH, .cached = CACHED, .claims = CLAIMS_COMPLETED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 1)}},
    {"degrade: key step fails", .begin_rc = TD_EINTERNAL, .outcome = ORDER_CREATED, .status = 201,
     .calls = FULL_PATH, .cached = CACHED, .claims = CLAIMS_COMPLETED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 1)}},
    {"degrade: lock unavailable", .lock_rc = TD_EUNAVAIL, .outcome = ORDER_CREATED, .status = 201,
     .calls = FULL_PATH, .cached = CACHED, .claims = CLAIMS_COMPLETED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 1)}},
    {"degrade: token unavailable", .token_rc = TD_EUNAVAIL, .outcome = ORDER_CREATED, .status = 201,
     .calls = FULL_PATH, .cached = CACHED, .claims = CLAIMS_COMPLETED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 1)}},
    /* strict: 503, nothing written, what was claimed given back. */
    {"strict: key step unavailable", .strict = true, .begin_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE, .calls = "order_begin order_release", .claims = CLAIMS_RELEASED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 0)}},
    {"strict: lock unavailable", .strict = true, .lock_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE, .calls = "order_begin order_release", .claims = CLAIMS_RELEASED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 0)}},
    {"strict: lock fails", .strict = true, .lock_rc = TD_EINTERNAL, .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_release", .claims = CLAIMS_RELEASED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 0)}},
    {"strict: token unavailable", .strict = true, .token_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE, .calls = "order_begin order_release", .claims = CLAIMS_RELEASED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 0)}},
    /* The order is committed: Redis failing to record it changes nothing
     * in the answer (the unique index replays it on a retry). */
    {"Redis fails to record the answer", .complete_rc = TD_EUNAVAIL, .outcome = ORDER_CREATED,
     .status = 201, .calls = FULL_PATH},
    /* Likewise a failed release does not hide the real answer. */
    {"Redis fails to release after sold out", .release_rc = TD_EUNAVAIL, .create_rc = TD_ECONFLICT,
     .outcome = ORDER_SOLD_OUT, .calls = "order_begin order_create order_release"},

    /* each defence switched off (TICKETD_DEFENSES, demo only) */
    {"response cache off: neither copy answers", .off = DEFENCE_RESPONSE_CACHE, .local = LOCAL_SAME,
     .under_key = KEY_DONE, .outcome = ORDER_CREATED, .calls = LOCK_APART},
    {"response cache off: a success is not kept in-process", .off = DEFENCE_RESPONSE_CACHE,
     .outcome = ORDER_CREATED, .calls = FULL_PATH, .then = then_nothing_kept_in_process},
    {"in-flight key off: no marker set", .off = DEFENCE_INFLIGHT_KEY, .outcome = ORDER_CREATED,
     .calls = FULL_PATH, .then = then_no_marker_set},
    {"in-flight key off: another's marker does not stop it", .off = DEFENCE_INFLIGHT_KEY,
     .under_key = KEY_MARKER, .outcome = ORDER_CREATED, .calls = LOCK_APART},
    {"in-flight key off: a completed record still replays", .off = DEFENCE_INFLIGHT_KEY,
     .under_key = KEY_DONE, .outcome = ORDER_REPLAYED, .layer = "response-cache",
     .body = REDIS_BODY, .calls = "order_begin"},
    {"in-flight key and session lock off: the answer is still stored",
     .off = DEFENCE_INFLIGHT_KEY | DEFENCE_SESSION_LOCK, .outcome = ORDER_CREATED,
     .calls = FULL_PATH, .then = then_stored_without_claims},
    {"both key layers off", .off = DEFENCE_RESPONSE_CACHE | DEFENCE_INFLIGHT_KEY,
     .outcome = ORDER_CREATED, .calls = "lock_acquire token_take order_create order_complete",
     .then = then_no_marker_completed},
    {"session lock off: a lock held elsewhere is not asked", .off = DEFENCE_SESSION_LOCK,
     .lock_rc = TD_ECONFLICT, .outcome = ORDER_CREATED, .calls = FULL_PATH,
     .then = then_no_lock_completed},
    {"token off: an unknown token is not asked", .off = DEFENCE_TOKEN, .token_rc = TD_ENOTFOUND,
     .outcome = ORDER_CREATED, .calls = FULL_PATH, .recorded = RECORDED_NONE},
    /* The naive GET-then-spend (the cache adapter's, cache_naive.h) shows
     * what Redis alone lets through: the domain skips the database's
     * record of the token, and leaves the spend to the port. */
    {"token-atomic off: the database records no token", .off = DEFENCE_TOKEN_ATOMIC,
     .outcome = ORDER_CREATED, .calls = FULL_PATH, .recorded = RECORDED_NONE},
    /* The naive transactions are the store adapter's (store_naive.h): the
     * domain asks for the same order. */
    {"unique index off: the copy found is the look-up's", .off = DEFENCE_UNIQUE_INDEX,
     .token = TOK_SIGNED, .token_rc = TD_ENOTFOUND, .create_rc = TD_ESPENT, .found = FOUND_SAME,
     .outcome = ORDER_REPLAYED, .layer = "check-then-insert", .status = 201, .body = FOUND_BODY,
     .calls = "order_begin order_create order_find_request order_complete", .cached = CACHED,
     .claims = CLAIMS_COMPLETED},
    {"unique index off: the token is still recorded", .off = DEFENCE_UNIQUE_INDEX,
     .outcome = ORDER_CREATED, .calls = FULL_PATH, .recorded = RECORDED_SENT},
    {"stock CAS and unique index off: the same order asked for",
     .off = DEFENCE_STOCK_CAS | DEFENCE_UNIQUE_INDEX, .outcome = ORDER_CREATED, .calls = FULL_PATH},
    {"forget-failures off: the chosen step is handed the failure and the key",
     .off = DEFENCE_FORGET_FAILURES, .create_rc = TD_ECONFLICT, .outcome = ORDER_SOLD_OUT,
     .calls = "order_begin order_create", .claims = CLAIMS_KEPT, .then = then_failure_handed_over},
    /* The others are not the order transaction's business. */
    {"callback and consumer dedup off: the order is untouched",
     .off = DEFENCE_CALLBACK_DEDUP | DEFENCE_CONSUMER_DEDUP, .outcome = ORDER_CREATED,
     .calls = FULL_PATH},
    /* Nothing but the (unprotected) transaction. */
    {"all off", .off = ~0u, .local = LOCAL_SAME, .outcome = ORDER_CREATED, .calls = "order_create"},
};

#define NCASES (sizeof cases / sizeof cases[0])

/* --- what is no row ------------------------------------------------------- */

static void test_order_numbers(void **state)
{
    (void)state;
    char a[ORDER_NO_LEN + 1], b[ORDER_NO_LEN + 1], day[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    snprintf(day, sizeof day, "%02d%02d%02d", tm.tm_year % 100, tm.tm_mon + 1, tm.tm_mday);
    unique_index_new_number(a);
    unique_index_new_number(b);
    assert_int_equal(strlen(a), ORDER_NO_LEN);
    assert_int_equal(strspn(a, "0123456789"), ORDER_NO_LEN);
    /* The UTC day first, then randomness: two numbers never collide. */
    assert_memory_equal(a, day, 6);
    assert_string_not_equal(a, b);
}

static void test_result_cleanup(void **state)
{
    (void)state;
    struct order_request rq = {
        .user_id = USER, .key = KEY, .session_id = SESSION, .quantity = QTY, .token = TOKEN};
    struct order_result res;
    orders_create(&app, &rq, &render, &res);
    assert_non_null(res.body);
    order_result_cleanup(&res);
    assert_null(res.body);
    assert_int_equal(res.body_len, 0);
    assert_int_equal(res.status, 0);
    /* Twice is harmless. */
    order_result_cleanup(&res);
}

/* --- the order-key filter in front of the refusal's look-up ------------ */

/* A refusal Redis decided (another request holds the session), with the
 * filter answering trusted / maybe as given. */
static void refused_with_filter(bool trusted, bool maybe, unsigned off, struct order_result *res)
{
    struct order_request rq = {
        .user_id = USER, .key = KEY, .session_id = SESSION, .quantity = QTY, .token = TOKEN};
    app.bloom = bloom_size(1000, 10000);
    snprintf(app.bloom_shape, sizeof app.bloom_shape, "%llu:%d", (unsigned long long)app.bloom.m,
             app.bloom.k);
    app.defences = DEFENCES_ALL & ~off;
    fake_cache.lock_rc = TD_ECONFLICT;
    fake_cache.bloom_trusted = trusted;
    fake_cache.bloom_maybe = maybe;
    orders_create(&app, &rq, &render, res);
    assert_int_equal(res->outcome, ORDER_DUPLICATE_SUBMISSION);
}

static void test_filter_trusted_no_skips_the_database(void **state)
{
    struct order_result res;
    (void)state;
    refused_with_filter(true, false, 0, &res);
    assert_calls("order_begin");
    assert_int_equal(delta(M_BLOOM_SAVED), 1);
    assert_int_equal(delta(M_REFUSAL_DB_LOOKUPS), 0);
    order_result_cleanup(&res);
}

/* A "maybe" (true or false), an incomplete filter, or one this process
 * could not tell of an order: the database is asked, as without a filter. */
static void test_filter_doubt_asks_the_database(void **state)
{
    struct order_result res;
    (void)state;
    refused_with_filter(true, true, 0, &res);
    assert_calls("order_begin order_find_request");
    assert_int_equal(delta(M_BLOOM_MAYBE), 1);
    order_result_cleanup(&res);
    fakes_reset();
    refused_with_filter(false, false, 0, &res);
    assert_calls("order_begin order_find_request");
    assert_int_equal(delta(M_BLOOM_UNTRUSTED), 1);
    order_result_cleanup(&res);
    fakes_reset();
    atomic_store(&app.bloom_missed, true);
    refused_with_filter(true, false, 0, &res);
    assert_calls("order_begin order_find_request");
    assert_int_equal(delta(M_BLOOM_UNTRUSTED), 2);
    assert_int_equal(delta(M_REFUSAL_DB_LOOKUPS), 3);
    atomic_store(&app.bloom_missed, false);
    order_result_cleanup(&res);
}

/* bloom off asks the database every time. bloom-liveness off is the
 * cache adapter's (cache_naive.h: any filter called trusted): the domain
 * still takes an incomplete filter's "no" as doubt. */
static void test_filter_switched_off(void **state)
{
    struct order_result res;
    (void)state;
    refused_with_filter(false, false, DEFENCE_BLOOM_LIVENESS, &res);
    assert_calls("order_begin order_find_request");
    order_result_cleanup(&res);
    fakes_reset();
    refused_with_filter(true, false, DEFENCE_BLOOM, &res);
    assert_calls("order_begin order_find_request");
    assert_int_equal(fake_cache.bloom_checks, 0);
    order_result_cleanup(&res);
}

/* The step that records a completed order tells the filter of its key. */
static void test_created_order_is_added(void **state)
{
    struct order_request rq = {
        .user_id = USER, .key = KEY, .session_id = SESSION, .quantity = QTY, .token = TOKEN};
    struct order_result res;
    (void)state;
    app.bloom = bloom_size(1000, 10000);
    orders_create(&app, &rq, &render, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_int_equal(fake_cache.bloom_adds, 1);
    /* In the key's script, before the transaction: no round trip of its
     * own. */
    assert_int_equal(fake_cache.bloom_adds_in_begin, 1);
    assert_calls("order_begin order_create order_complete");
    order_result_cleanup(&res);
}

/* A token the key's script refuses leaves no bit behind: the filter is
 * there to spare such refusals their look-up, and a key noted by its own
 * refusal would always read "maybe". */
static void test_refused_token_sets_no_bits(void **state)
{
    struct order_request rq = {
        .user_id = USER, .key = KEY, .session_id = SESSION, .quantity = QTY, .token = TOKEN};
    struct order_result res;
    (void)state;
    app.bloom = bloom_size(1000, 10000);
    fake_cache.token_rc = TD_ECONFLICT;
    orders_create(&app, &rq, &render, &res);
    assert_int_equal(res.outcome, ORDER_TOKEN_INVALID);
    assert_int_equal(fake_cache.bloom_adds, 0);
    order_result_cleanup(&res);
}

/* A genuine token Redis forgot goes on to the database though the script
 * said "unknown" and set no bits: the filter is then told on its own,
 * still before the transaction. */
static void test_forgotten_token_notes_on_its_own(void **state)
{
    char token[ORDERTOKEN_MAX + 1];
    struct order_request rq = {
        .user_id = USER, .key = KEY, .session_id = SESSION, .quantity = QTY, .token = token};
    struct order_result res;
    (void)state;
    ordertoken_new(cfg.jwt_secret, USER, wall_s() + 600, token);
    app.bloom = bloom_size(1000, 10000);
    fake_cache.token_rc = TD_ENOTFOUND;
    orders_create(&app, &rq, &render, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_int_equal(fake_cache.bloom_adds, 1);
    assert_int_equal(fake_cache.bloom_adds_in_begin, 0);
    order_result_cleanup(&res);
}

/* Prefer: wait off a fiber (no loop to park on): the request looks at its
 * key again after each poll interval until its N passes, then is refused
 * as without the header; the refusal and the wait are counted once. */
static void test_wait_runs_out_off_a_fiber(void **state)
{
    char fp[IDEM_FP_LEN + 1];
    struct order_request rq = {.user_id = USER,
                               .key = KEY,
                               .session_id = SESSION,
                               .quantity = QTY,
                               .token = TOKEN,
                               .wait_s = 1};
    struct order_result res;
    (void)state;
    idem_fingerprint_order(SESSION, QTY, fp);
    char *rec = idem_marker(fp, OTHER_INSTANCE "0123456789abcdef");
    fake_cache.idem_begin_rc = TD_EDUP;
    snprintf(fake_cache.existing, sizeof fake_cache.existing, "%s", rec);
    free(rec);
    orders_create(&app, &rq, &render, &res);
    assert_int_equal(res.outcome, ORDER_IN_PROGRESS);
    assert_string_equal(order_layer_name(res.layer), "inflight-key");
    assert_true(fake_cache.idem_begin.calls >= 2);
    assert_int_equal(delta(M_KEY_WAITS), 1);
    assert_int_equal(delta(M_KEY_WAITS_RAN_OUT), 1);
    assert_int_equal(delta(M_KEY_WAITS_ANSWERED), 0);
    assert_int_equal(delta(M_DUP_INFLIGHT_KEY), 1);
    order_result_cleanup(&res);
}

/* Without a wait, the marker is refused at the first look. */
static void test_no_wait_refuses_at_once(void **state)
{
    char fp[IDEM_FP_LEN + 1];
    struct order_request rq = {
        .user_id = USER, .key = KEY, .session_id = SESSION, .quantity = QTY, .token = TOKEN};
    struct order_result res;
    (void)state;
    idem_fingerprint_order(SESSION, QTY, fp);
    char *rec = idem_marker(fp, OTHER_INSTANCE "0123456789abcdef");
    fake_cache.idem_begin_rc = TD_EDUP;
    snprintf(fake_cache.existing, sizeof fake_cache.existing, "%s", rec);
    free(rec);
    orders_create(&app, &rq, &render, &res);
    assert_int_equal(res.outcome, ORDER_IN_PROGRESS);
    assert_int_equal(fake_cache.idem_begin.calls, 1);
    assert_int_equal(delta(M_KEY_WAITS), 0);
    order_result_cleanup(&res);
}

int main(void)
{
    /* The malformed-record row logs a warning by design. */
    log_set_level(LOG_ERROR);
    struct CMUnitTest tests[NCASES + 8] = {
        cmocka_unit_test_setup_teardown(test_order_numbers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_result_cleanup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_trusted_no_skips_the_database, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_doubt_asks_the_database, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_switched_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_created_order_is_added, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_token_sets_no_bits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forgotten_token_notes_on_its_own, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_runs_out_off_a_fiber, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_wait_refuses_at_once, setup, teardown),
    };
    for (size_t i = 0; i < NCASES; i++)
        tests[i + 8] = (struct CMUnitTest){.name = cases[i].name,
                                           .test_func = run_row,
                                           .setup_func = setup,
                                           .teardown_func = teardown,
                                           .initial_state = (void *)&cases[i]};
    return cmocka_run_group_tests_name("orders", tests, NULL, NULL);
}
