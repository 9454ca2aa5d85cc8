/* The outbox relay and the stream consumers against the real binary, Redis
 * and MariaDB: every paid order is credited and ticketed exactly once,
 * whatever is delivered twice, whoever crashes where, and whatever Redis
 * forgets. Paid orders and their outbox rows are written by SQL, the way
 * the payment transaction writes them, unless a test goes through the
 * payment callback itself. */
#include "harness.h"

#include "util.h"

#include <hiredis.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define STREAM      "ticketd:events"
#define DEAD_STREAM "ticketd:events:dead"
#define WAIT_MS     20000

/* Fast takeover and short blocking reads, so the tests wait seconds, not
 * minutes; the behaviour is the same at the defaults. */
#define FAST_ENV "TICKETD_CLAIM_IDLE_MS=500", "TICKETD_CONSUMER_BLOCK_MS=100"

static int setup(void **state)
{
    th_setup_fresh(state);
    th_db_exec("TRUNCATE TABLE dead_letters");
    return 0;
}

/* ---- helpers ---- */

/* A Redis command whose reply is an array, on the test's own connection;
 * reconnects once when Redis was restarted under it. */
static redisReply *redis_cmd(const char *fmt, ...)
{
    static redisContext *c;
    redisReply *r = NULL;
    for (int attempt = 0; attempt < 2 && r == NULL; attempt++) {
        if (c != NULL && (c->err || attempt > 0)) {
            redisFree(c);
            c = NULL;
        }
        if (c == NULL) {
            struct timeval tv = {2, 0};
            const char *port = getenv("TICKETD_TEST_REDIS_PORT");
            c = redisConnectWithTimeout("127.0.0.1", port != NULL ? atoi(port) : 26379, tv);
            if (c == NULL || c->err)
                fail_msg("cannot connect to the test Redis");
        }
        va_list ap;
        va_start(ap, fmt);
        r = redisvCommand(c, fmt, ap);
        va_end(ap);
    }
    if (r == NULL)
        fail_msg("Redis command failed: %s", c->errstr);
    return r;
}

/* Entries the group has delivered and not yet acked (XPENDING summary). */
static long long pending(const char *group)
{
    redisReply *r = redis_cmd("XPENDING %s %s", STREAM, group);
    long long n = r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                          r->element[0]->type == REDIS_REPLY_INTEGER
                      ? r->element[0]->integer
                      : -1;
    freeReplyObject(r);
    return n;
}

/* Entries delivered and not acknowledged, over both groups. A group the
 * crashed worker had not created yet (its thread was slower than the
 * other's first delivery) holds none. */
static long long pending_total(void)
{
    long long p = pending("points"), t = pending("ticketing");
    return (p > 0 ? p : 0) + (t > 0 ? t : 0);
}

static void wait_drained(void)
{
    double deadline = th_now_s() + WAIT_MS / 1000.0;
    while (th_now_s() < deadline) {
        if (pending("points") == 0 && pending("ticketing") == 0)
            return;
        usleep(50000);
    }
    fail_msg("entries still pending: points %lld, ticketing %lld", pending("points"),
             pending("ticketing"));
}

static int64_t amount_of(int i)
{
    return 100 * (1 + i % 9) + i % 100; /* floor(amount / 100) = 1 + i % 9 */
}

static char *payload_of(int tag, int i)
{
    char no[21];
    th_order_no(tag, i, no);
    return xasprintf("{\"event_type\":\"order.paid\",\"order_no\":\"%s\",\"order_id\":%d,"
                     "\"user_id\":%lld,\"session_id\":1,\"quantity\":1,\"amount_cents\":%lld,"
                     "\"txn_id\":\"txn-%s\",\"occurred_at\":\"2026-12-01T08:00:00Z\"}",
                     no, i + 1, (long long)th_user_of(tag, i), (long long)amount_of(i), no);
}

static void query(const char *q)
{
    MYSQL *m = th_db();
    if (mysql_real_query(m, q, strlen(q)) != 0)
        fail_msg("statement failed: %.200s: %s", q, mysql_error(m));
}

/* Writes orders from..from+n-1 of tag as PAID, each with its order.paid
 * outbox row, in one transaction per table, as the payment callback would. */
static void insert_paid(int tag, int from, int n)
{
    size_t cap = (size_t)n * 512 + 256;
    char *orders = xmalloc(cap), *outbox = xmalloc(cap * 2);
    size_t lo = (size_t)snprintf(orders, cap,
                                 "INSERT INTO orders (order_no, user_id, session_id, request_id, "
                                 "quantity, amount_cents, status, version) VALUES ");
    size_t lb = (size_t)snprintf(outbox, cap * 2,
                                 "INSERT INTO outbox (event_type, biz_key, payload) VALUES ");
    for (int i = from; i < from + n; i++) {
        char no[21];
        th_order_no(tag, i, no);
        char *p = payload_of(tag, i);
        lo += (size_t)snprintf(
            orders + lo, cap - lo, "%s('%s', %lld, 1, 'req-%s', 1, %lld, 'PAID', 2)",
            i > from ? "," : "", no, (long long)th_user_of(tag, i), no, (long long)amount_of(i));
        lb += (size_t)snprintf(outbox + lb, cap * 2 - lb, "%s('order.paid', '%s', '%s')",
                               i > from ? "," : "", no, p);
        free(p);
    }
    query(orders);
    query(outbox);
    free(orders);
    free(outbox);
}

/* Orders of tag that were credited exactly their points and ticketed
 * exactly once. Each order has its own user. */
static int64_t settled_orders(int tag)
{
    return th_db_int("SELECT COUNT(*) FROM orders o JOIN user_points p ON p.user_id = o.user_id "
                     "WHERE o.order_no LIKE '%02d%%' AND p.points = FLOOR(o.amount_cents / 100) "
                     "AND o.status = 'TICKETED' AND o.version = 3",
                     tag);
}

static void expect_exactly_once(int tag, int n)
{
    th_wait_db(n, WAIT_MS, "orders credited and ticketed",
               "SELECT COUNT(*) FROM orders o JOIN user_points p "
               "ON p.user_id = o.user_id WHERE o.order_no LIKE '%02d%%' AND o.status = 'TICKETED' "
               "AND p.points > 0",
               tag);
    wait_drained();
    assert_int_equal(settled_orders(tag), n);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM consume_records WHERE biz_key LIKE "
                               "'points:%02d%%'",
                               tag),
                     n);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM consume_records WHERE biz_key LIKE "
                               "'ticketing:%02d%%'",
                               tag),
                     n);
    /* One PAID -> TICKETED transition per order, never two. */
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history h JOIN orders o ON o.id = "
                               "h.order_id WHERE o.order_no LIKE '%02d%%' AND h.cause = 'ticket'",
                               tag),
                     n);
    assert_int_equal(th_db_int("SELECT COALESCE(SUM(points), 0) FROM user_points WHERE user_id "
                               "BETWEEN %lld AND %lld",
                               (long long)th_user_of(tag, 0), (long long)th_user_of(tag, 99999)),
                     th_db_int("SELECT COALESCE(SUM(FLOOR(amount_cents / 100)), 0) FROM orders "
                               "WHERE order_no LIKE '%02d%%'",
                               tag));
}

/* The first column of the first row of q as text ("" for none or NULL). */
static void db_text(const char *q, char *out, size_t cap)
{
    MYSQL *m = th_db();
    out[0] = '\0';
    if (mysql_real_query(m, q, strlen(q)) != 0)
        fail_msg("query failed: %s: %s", q, mysql_error(m));
    MYSQL_RES *res = mysql_store_result(m);
    MYSQL_ROW row = res != NULL ? mysql_fetch_row(res) : NULL;
    if (row != NULL && row[0] != NULL)
        snprintf(out, cap, "%s", row[0]);
    mysql_free_result(res);
}

static int64_t points_of(int64_t user)
{
    return th_db_int("SELECT COALESCE((SELECT points FROM user_points WHERE user_id = %lld), 0)",
                     (long long)user);
}

/* A copy of order i's entry, as a redelivery or a second relay would add. */
static void xadd_copy(int tag, int i)
{
    char no[21];
    th_order_no(tag, i, no);
    char *p = payload_of(tag, i);
    int64_t id = th_db_int("SELECT id FROM outbox WHERE biz_key = '%s'", no);
    char ids[24];
    snprintf(ids, sizeof ids, "%lld", (long long)id);
    redisReply *r = redis_cmd("XADD %s * outbox_id %s event_type order.paid biz_key %s payload %s",
                              STREAM, ids, no, p);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    free(p);
}

/* Waits for a process that is expected to die on its own (a crash fault
 * point); returns its exit status. */
static int wait_exit(struct th_server *s)
{
    double deadline = th_now_s() + WAIT_MS / 1000.0;
    while (th_now_s() < deadline) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(20000);
    }
    th_kill(s);
    fail_msg("the process did not die at its fault point; see %s", s->log_path);
    return -1;
}

/* ---- delivered twice ---- */

static void test_duplicates_have_no_effect(void **state)
{
    struct th_server *srv;
    (void)state;
    const char *env[] = {FAST_ENV, NULL};
    srv = th_serve(0, env);
    insert_paid(11, 0, 1);
    int64_t user = th_user_of(11, 0);
    expect_exactly_once(11, 1);
    int64_t points = points_of(user);
    assert_int_equal(points, 1);
    assert_int_equal(th_metric(srv, "ticketd_events_published_total"), 1);

    /* The same event again in the stream: a redelivery. */
    xadd_copy(11, 0);
    th_wait_metric(srv, "ticketd_events_duplicates_skipped_total{consumer=\"points\"}", 1, WAIT_MS);
    th_wait_metric(srv, "ticketd_events_duplicates_skipped_total{consumer=\"ticketing\"}", 1,
                   WAIT_MS);
    wait_drained();
    assert_int_equal(points_of(user), points);

    /* The relay publishes the row a second time (as after a crash between
     * XADD and the mark). */
    th_db_exec("UPDATE outbox SET published_at = NULL");
    th_wait_metric(srv, "ticketd_events_published_total", 2, WAIT_MS);
    th_wait_metric(srv, "ticketd_events_duplicates_skipped_total{consumer=\"points\"}", 2, WAIT_MS);
    th_wait_metric(srv, "ticketd_events_duplicates_skipped_total{consumer=\"ticketing\"}", 2,
                   WAIT_MS);
    wait_drained();
    assert_int_equal(th_redis_int("XLEN %s", STREAM), 3);
    assert_int_equal(points_of(user), points);
    assert_int_equal(settled_orders(11), 1);
    assert_int_equal(th_metric(srv, "ticketd_events_consumed_total{consumer=\"points\"}"), 1);
    assert_int_equal(th_metric(srv, "ticketd_events_consumed_total{consumer=\"ticketing\"}"), 1);
    assert_int_equal(th_stop(srv), 0);
}

/* ---- crashes ---- */

static void test_crash_after_effect_before_ack(void **state)
{
    struct th_server *a, *b;
    (void)state;
    const char *crash[] = {FAST_ENV, "TICKETD_FAULT=consumer.after_effect:crash", NULL};
    const char *env[] = {FAST_ENV, NULL};
    a = th_worker("after-effect-a", crash);
    insert_paid(12, 0, 1);
    assert_int_equal(wait_exit(a), 137);
    assert_true(th_log_contains(a, "fault point consumer.after_effect: crashing"));
    /* The first group's effect is committed, its entry still pending. */
    assert_true(th_db_int("SELECT COUNT(*) FROM consume_records") >= 1);
    assert_true(pending_total() >= 1);

    b = th_worker("after-effect-b", env);
    expect_exactly_once(12, 1);
    assert_int_equal(points_of(th_user_of(12, 0)), 1);
    assert_int_equal(th_stop(b), 0);
}

static void test_crash_before_effect(void **state)
{
    struct th_server *a, *b;
    (void)state;
    const char *crash[] = {FAST_ENV, "TICKETD_FAULT=consumer.before_effect:crash", NULL};
    const char *env[] = {FAST_ENV, NULL};
    a = th_worker("before-effect-a", crash);
    insert_paid(13, 0, 3);
    assert_int_equal(wait_exit(a), 137);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM consume_records"), 0);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM user_points"), 0);
    assert_true(pending_total() >= 1);

    /* The takeover: another worker claims what the dead one held. */
    b = th_worker("before-effect-b", env);
    expect_exactly_once(13, 3);
    assert_int_equal(th_stop(b), 0);
}

static void test_relay_crash_after_xadd(void **state)
{
    struct th_server *a, *b;
    (void)state;
    const char *crash[] = {FAST_ENV, "TICKETD_FAULT=relay.after_xadd:crash", NULL};
    const char *env[] = {FAST_ENV, NULL};
    a = th_worker("relay-a", crash);
    insert_paid(14, 0, 5);
    assert_int_equal(wait_exit(a), 137);
    /* In the stream, but the rows were never marked. */
    assert_int_equal(th_redis_int("XLEN %s", STREAM), 5);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM outbox WHERE published_at IS NULL"), 5);

    b = th_worker("relay-b", env);
    expect_exactly_once(14, 5);
    th_wait_db(0, WAIT_MS, "unpublished rows",
               "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL");
    assert_int_equal(th_redis_int("XLEN %s", STREAM), 10); /* each event twice, applied once */
    assert_int_equal(th_stop(b), 0);
}

/* ---- several workers ---- */

static void test_two_workers_many_orders(void **state)
{
    struct th_server *w1, *w2;
    (void)state;
    const int n = 400;
    const char *env[] = {FAST_ENV, NULL};
    w1 = th_worker("many-1", env);
    w2 = th_worker("many-2", env);
    usleep(300000); /* both up, their groups created */
    double t0 = th_now_s();
    for (int i = 0; i < n; i += 100)
        insert_paid(15, i, 100);
    th_wait_db(0, WAIT_MS, "unpublished rows",
               "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL");
    double t1 = th_now_s();
    expect_exactly_once(15, n);
    double t2 = th_now_s();
    print_message("      %d events: relayed in %.2f s (%.0f/s), applied by both groups in "
                  "%.2f s (%.0f/s)\n",
                  n, t1 - t0, n / (t1 - t0), t2 - t0, n / (t2 - t0));
    /* Two relays, and no row published twice: SKIP LOCKED split the work. */
    assert_int_equal(th_redis_int("XLEN %s", STREAM), n);
    assert_int_equal(th_stop(w1), 0);
    assert_int_equal(th_stop(w2), 0);
}

/* ---- Redis forgets ---- */

static void test_redis_restart_mid_stream(void **state)
{
    struct th_server *w;
    (void)state;
    const char *env[] = {FAST_ENV, NULL};
    w = th_worker("redis-restart", env);
    /* Redis goes while the first orders are being consumed: some entries
     * are pending, some not yet read, some rows not yet published. */
    insert_paid(16, 0, 300);
    th_wait_db(1, WAIT_MS, "first credits", "SELECT COUNT(*) > 0 FROM consume_records");
    th_services("stop-redis");
    int64_t done = th_db_int("SELECT COUNT(*) FROM consume_records");
    insert_paid(16, 300, 100); /* these wait in the outbox */
    usleep(700000);
    th_services("start-redis");
    insert_paid(16, 400, 100);
    expect_exactly_once(16, 500);
    print_message("      %lld of 1000 effects applied when Redis stopped; %s\n", (long long)done,
                  th_log_contains(w, "are queued again") ? "lost entries were published again"
                                                         : "no entry was lost");
    assert_int_equal(th_stop(w), 0);
}

static void test_lost_entries_are_published_again(void **state)
{
    struct th_server *a, *b;
    (void)state;
    /* A worker whose consumers fail every event: everything is published
     * and nothing applied. Then Redis restarts without its data. */
    const char *failing[] = {"TICKETD_FAULT=consumer.before_effect:fail",
                             "TICKETD_CLAIM_IDLE_MS=60000", "TICKETD_MAX_DELIVERIES=1000", NULL};
    const char *env[] = {FAST_ENV, NULL};
    a = th_worker("lost-a", failing);
    insert_paid(17, 0, 50);
    th_wait_db(0, WAIT_MS, "unpublished rows",
               "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL");
    assert_int_equal(th_stop(a), 0);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM consume_records"), 0);
    th_services("stop-redis");
    th_services("start-redis");
    assert_int_equal(th_redis_int("EXISTS %s", STREAM), 0);

    b = th_worker("lost-b", env);
    expect_exactly_once(17, 50);
    assert_int_equal(th_stop(b), 0);
    assert_true(th_log_contains(b, "missing from ticketd:events and are queued again"));
}

/* ---- giving up ---- */

static void test_dead_letters(void **state)
{
    struct th_server *a, *b;
    (void)state;
    const char *failing[] = {"TICKETD_FAULT=consumer.before_effect:fail",
                             "TICKETD_CLAIM_IDLE_MS=100", "TICKETD_CONSUMER_BLOCK_MS=50",
                             "TICKETD_MAX_DELIVERIES=2", NULL};
    const char *env[] = {FAST_ENV, NULL};
    a = th_worker("dead-a", failing);
    insert_paid(18, 0, 1);
    /* A payload no delivery can fix is given up on at once. */
    th_db_exec("INSERT INTO outbox (event_type, biz_key, payload) "
               "VALUES ('order.paid', '18999999999999999999', 'not json')");
    th_wait_db(4, WAIT_MS, "dead letters", "SELECT COUNT(*) FROM dead_letters");
    wait_drained();
    assert_int_equal(th_redis_int("XLEN %s", DEAD_STREAM), 4);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM dead_letters WHERE deliveries = 3"), 2);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM dead_letters WHERE biz_key = "
                               "'points:18999999999999999999'"),
                     1);
    assert_int_equal(th_stop(a), 0);

    /* Dead-lettered counts as settled: even with its entry trimmed away, the
     * relay does not queue the event again. */
    redisReply *r = redis_cmd("XTRIM %s MAXLEN 0", STREAM);
    freeReplyObject(r);
    char before[256], after[256];
    db_text("SELECT GROUP_CONCAT(stream_id ORDER BY id) FROM outbox", before, sizeof before);
    assert_true(before[0] != '\0');
    b = th_worker("dead-b", env);
    sleep(3); /* a few redrive checks */
    db_text("SELECT GROUP_CONCAT(stream_id ORDER BY id) FROM outbox", after, sizeof after);
    assert_string_equal(after, before);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM user_points"), 0);
    assert_int_equal(th_stop(b), 0);
}

/* ---- the defence switched off ---- */

static void test_demo_without_consumer_dedup(void **state)
{
    struct th_server *srv;
    (void)state;
    const char *env[] = {FAST_ENV, "TICKETD_ENV=demo", "TICKETD_DEFENSES=-consumer-dedup", NULL};
    srv = th_serve(1, env);
    insert_paid(19, 0, 1);
    int64_t user = th_user_of(19, 0);
    th_wait_db(1, WAIT_MS, "points",
               "SELECT COALESCE(SUM(points), 0) FROM user_points WHERE user_id = %lld",
               (long long)user);
    xadd_copy(19, 0);
    /* The damage the dedup row prevents: the redelivery pays out again. */
    th_wait_db(2, WAIT_MS, "doubled points",
               "SELECT COALESCE(SUM(points), 0) FROM user_points WHERE user_id = %lld",
               (long long)user);
    wait_drained();
    /* Ticketing is still once: its compare-and-set refuses a second move. */
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history WHERE cause = 'ticket'"), 1);
    assert_int_equal(th_stop(srv), 0);
}

/* ---- GET /me, end to end ---- */

static struct th_resp me(const struct th_server *s, int64_t user)
{
    char url[128];
    snprintf(url, sizeof url, "%s/api/v1/me", s->url);
    const char *h[] = {th_auth_header(user, false), NULL};
    return th_request("GET", url, h, NULL);
}

static int64_t me_points(const struct th_server *s, int64_t user)
{
    struct th_resp r = me(s, user);
    assert_int_equal(r.status, 200);
    json_t *j = th_json(&r);
    assert_int_equal(json_integer_value(json_object_get(j, "user_id")), user);
    int64_t p = json_integer_value(json_object_get(j, "points"));
    json_decref(j);
    th_resp_free(&r);
    return p;
}

static struct th_resp pay(const struct th_server *s, const char *txn, const char *no,
                          int64_t amount)
{
    char url[128], body[256], ts[32], sig[65], hts[64], hsig[160];
    snprintf(url, sizeof url, "%s/api/v1/payments/callback", s->url);
    snprintf(body, sizeof body,
             "{\"txn_id\":\"%s\",\"order_no\":\"%s\",\"amount_cents\":%lld,\"status\":\"SUCCESS\"}",
             txn, no, (long long)amount);
    snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    th_pay_sign(TH_PAY_SECRET, ts, body, sig);
    snprintf(hts, sizeof hts, "X-Pay-Timestamp: %s", ts);
    snprintf(hsig, sizeof hsig, "X-Pay-Signature: %s", sig);
    const char *h[] = {hts, hsig, NULL};
    return th_request("POST", url, h, body);
}

static void test_me_after_payment(void **state)
{
    struct th_server *srv;
    char tok[96], url[160];
    (void)state;
    const char *env[] = {FAST_ENV, NULL};
    srv = th_serve(2, env);

    snprintf(url, sizeof url, "%s/api/v1/me", srv->url);
    struct th_resp unauth = th_request("GET", url, NULL, NULL);
    assert_int_equal(unauth.status, 401);
    assert_string_equal(th_code(&unauth), "UNAUTHENTICATED");
    th_resp_free(&unauth);
    assert_int_equal(me_points(srv, 77), 0);

    /* Order, pay (twice: the gateway retries), and the consumers do the rest. */
    int64_t session = th_session(srv, 10, 1250);
    th_order_token(srv, 77, tok);
    struct th_resp o = th_order(srv, 77, "me-1", tok, session, 2);
    assert_int_equal(o.status, 201);
    json_t *oj = th_json(&o);
    char no[32];
    snprintf(no, sizeof no, "%s", json_string_value(json_object_get(oj, "order_no")));
    json_decref(oj);
    th_resp_free(&o);
    for (int i = 0; i < 2; i++) {
        struct th_resp p = pay(srv, "txn-me-1", no, 2500);
        assert_int_equal(p.status, 200);
        th_resp_free(&p);
    }
    th_wait_db(1, WAIT_MS, "ticketed",
               "SELECT COUNT(*) FROM orders WHERE order_no = '%s' AND status = "
               "'TICKETED'",
               no);
    wait_drained();
    assert_int_equal(me_points(srv, 77), 25);
    assert_int_equal(me_points(srv, 78), 0);

    snprintf(url, sizeof url, "%s/api/v1/orders/%s", srv->url, no);
    const char *h[] = {th_auth_header(77, false), NULL};
    struct th_resp g = th_request("GET", url, h, NULL);
    json_t *gj = th_json(&g);
    assert_string_equal(json_string_value(json_object_get(gj, "status")), "TICKETED");
    json_decref(gj);
    th_resp_free(&g);
    assert_int_equal(th_stop(srv), 0);
}

/* Each test runs between these fixtures. */
#define T(f) cmocka_unit_test_setup_teardown(f, setup, th_teardown_kill)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_duplicates_have_no_effect),
        T(test_crash_after_effect_before_ack),
        T(test_crash_before_effect),
        T(test_relay_crash_after_xadd),
        T(test_two_workers_many_orders),
        T(test_redis_restart_mid_stream),
        T(test_lost_entries_are_published_again),
        T(test_dead_letters),
        T(test_demo_without_consumer_dedup),
        T(test_me_after_payment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
