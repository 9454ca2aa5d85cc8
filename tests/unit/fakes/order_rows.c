/* order_rows.c - the runner of the order flow's rows (order_rows.h):
 * the settings and fakes a row gives, orders_create() on them, and the
 * checks every row makes. The rows themselves live in the test of the
 * defence they describe (tests/unit/domain/test_<defence>.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "order_rows.h"

#include "fakes.h"

#include "config.h"
#include "defences.h"
#include "err.h"
#include "idem.h"
#include "inflight_key.h"
#include "log.h"
#include "order_steps.h"
#include "ordertoken.h"
#include "respcache.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct config rows_cfg;
struct app rows_app;

int rows_setup(void **state)
{
    (void)state; /* the row, set by cmocka: left as it is */
    config_defaults(&rows_cfg);
    rows_cfg.tx_retries = 2;
    rows_app =
        (struct app){.cfg = &rows_cfg, .defences = DEFENCES_ALL, .respcache = respcache_new(64)};
    snprintf(rows_app.instance, sizeof rows_app.instance, "%s", OUR_INSTANCE);
    fakes_reset();
    fake_metrics_mark();
    return 0;
}

int rows_teardown(void **state)
{
    (void)state;
    respcache_free(rows_app.respcache);
    rows_app.respcache = NULL;
    config_cleanup(&rows_cfg);
    return 0;
}

int64_t rows_delta(enum metric m)
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

const struct order_render rows_render = {render_order, render_failure};

void rows_assert_calls(const char *want)
{
    if (strcmp(fake_calls, want) != 0)
        fail_msg("port calls\n   were: %s\n   want: %s", fake_calls, want);
}

bool rows_locally_cached(char *body_out, size_t cap)
{
    struct cached_response r;
    bool hit = respcache_get(rows_app.respcache, USER, KEY, mono_ms(), &r);
    if (hit && body_out != NULL)
        snprintf(body_out, cap, "%s", r.body);
    free(r.body);
    return hit;
}

/* The step boot.c puts in the table with forget-failures off stands in
 * for the naive one (order_naive.h, which the domain's tests do not link):
 * the flow must hand it the failure and the key, still held, in place of
 * giving the key back itself. */
struct rows_failure_step rows_failure_step;

static void end_failure_step(struct app *a, const struct order_request *rq, struct inflight_key *k,
                             const struct order_render *r, const struct order_result *res)
{
    (void)a, (void)rq, (void)r;
    rows_failure_step.calls++;
    rows_failure_step.outcome = res->outcome;
    rows_failure_step.held = inflight_key_holds(k);
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
    rows_app.order_steps = &chosen_steps;
    memset(&rows_failure_step, 0, sizeof rows_failure_step);
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
        respcache_free(rows_app.respcache);
        rows_app.respcache = NULL;
        return;
    }
    if (c->local == LOCAL_NONE)
        return;
    idem_fingerprint_order(SESSION, c->local == LOCAL_SAME ? QTY : QTY + 1, fp);
    respcache_put(rows_app.respcache, USER, KEY, fp, 201, LOCAL_BODY, strlen(LOCAL_BODY), mono_ms(),
                  mono_ms() + 60000);
}

static void found_in_database(const struct order_case *c)
{
    fake_store.find_conflicts = c->find_conflicts;
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
    rows_app.defences = DEFENCES_ALL & ~c->off;
    choose_steps(c->off);
    rows_cfg.redis_policy = c->strict ? REDIS_POLICY_STRICT : REDIS_POLICY_DEGRADE;
    if (c->tries > 0)
        rows_cfg.tx_retries = c->tries - 1;
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
        ordertoken_new(rows_cfg.jwt_secret, USER + (c->token == TOK_OTHER_USER),
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
        assert_false(rows_locally_cached(NULL, 0));
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
        assert_true(rows_locally_cached(body, sizeof body));
        assert_non_null(res->body);
        assert_string_equal(body, res->body);
    } else if (cached == NOT_CACHED) {
        assert_false(rows_locally_cached(NULL, 0));
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

    orders_create(&rows_app, &rq, &rows_render, &res);

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
    rows_assert_calls(c->calls);
    assert_cached(c->cached, &res);
    assert_claims(c->claims, &res);
    assert_recorded(c->recorded, &rq);
    for (size_t i = 0; i < sizeof c->counts / sizeof c->counts[0]; i++) {
        if (c->counts[i].on && rows_delta(c->counts[i].m) != c->counts[i].n)
            fail_msg("metric %d moved by %lld, want %lld", c->counts[i].m,
                     (long long)rows_delta(c->counts[i].m), (long long)c->counts[i].n);
    }
    if (c->then != NULL)
        c->then(&res);
    order_result_cleanup(&res);
}

int rows_run(const char *group, const struct CMUnitTest *own, size_t nown,
             const struct order_case *rows, size_t nrows)
{
    /* The malformed-record row logs a warning by design. */
    log_set_level(LOG_ERROR);
    struct CMUnitTest *tests = calloc(nown + nrows, sizeof *tests);
    if (tests == NULL)
        return 1;
    for (size_t i = 0; i < nown; i++)
        tests[i] = own[i];
    for (size_t i = 0; i < nrows; i++)
        tests[nown + i] = (struct CMUnitTest){.name = rows[i].name,
                                              .test_func = run_row,
                                              .setup_func = rows_setup,
                                              .teardown_func = rows_teardown,
                                              .initial_state = (void *)&rows[i]};
    int failed = _cmocka_run_group_tests(group, tests, nown + nrows, NULL, NULL);
    free(tests);
    return failed;
}
