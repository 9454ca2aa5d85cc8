/* Records kept for their window and dropped by partition, against the real
 * binary, Redis and MariaDB. The retention job is made to see a later day
 * (TICKETD_RETENTION_TODAY, test and demo only) so that today's partitions
 * are past retention without waiting a week; what it drops is real.
 * Beyond the window the business tables answer: the order from orders, the
 * callback from payments, the redelivered event from the points ledger;
 * without the ledger (the demo) the late redelivery credits again. */
#include "harness.h"

#include "util.h"

#include <hiredis.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define STREAM   "ticketd:events"
#define WAIT_MS  20000
#define FAST_ENV "TICKETD_CLAIM_IDLE_MS=500", "TICKETD_CONSUMER_BLOCK_MS=100"

static const char *const retained[] = {"outbox", "consume_records", "dead_letters",
                                       "idempotency_records"};

/* Every test starts from the migrations' layout: one p_future partition
 * each, as a fresh database has (a test's moved clock leaves days ahead). */
static int setup(void **state)
{
    th_setup_fresh(state);
    th_db_exec("TRUNCATE TABLE dead_letters");
    th_db_exec("TRUNCATE TABLE points_ledger");
    for (size_t i = 0; i < sizeof retained / sizeof retained[0]; i++)
        th_db_exec("ALTER TABLE %s PARTITION BY RANGE (TO_DAYS(created_day)) "
                   "(PARTITION p_future VALUES LESS THAN MAXVALUE)",
                   retained[i]);
    return 0;
}

/* "TICKETD_RETENTION_TODAY=<today + days>" in a static buffer. */
static const char *today_plus(int days)
{
    static char buf[64];
    char day[DAY_LEN + 1];
    format_day((int64_t)time(NULL) / 86400 + days, day);
    snprintf(buf, sizeof buf, "TICKETD_RETENTION_TODAY=%s", day);
    return buf;
}

/* `ticketd partitions` with env; returns its output (caller frees). */
static char *partitions(const char *const *env)
{
    const char *args[] = {"partitions", NULL};
    char *out = NULL;
    int rc = th_cli(args, env, &out);
    if (rc != 0)
        fail_msg("ticketd partitions exited %d: %s", rc, out != NULL ? out : "");
    return out;
}

/* A table's day partitions (p_future not counted); '%s': the table. */
#define DAY_PARTITIONS_SQL                                                                         \
    "SELECT COUNT(*) FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = DATABASE() AND "      \
    "TABLE_NAME = '%s' AND PARTITION_NAME LIKE 'p2%%'"

static int64_t day_partitions(const char *table)
{
    return th_db_int(DAY_PARTITIONS_SQL, table);
}

/* The gateway's callback for order no, paid under txn; returns the answer. */
static struct th_resp pay(const struct th_server *s, const char *txn, const char *no)
{
    char url[128], body[256], ts[32], sig[65], th[64], sh[96];
    snprintf(url, sizeof url, "%s/api/v1/payments/callback", s->url);
    snprintf(body, sizeof body,
             "{\"txn_id\":\"%s\",\"order_no\":\"%s\",\"amount_cents\":1500,\"status\":\"SUCCESS\"}",
             txn, no);
    snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    th_pay_sign(TH_PAY_SECRET, ts, body, sig);
    snprintf(th, sizeof th, "X-Pay-Timestamp: %s", ts);
    snprintf(sh, sizeof sh, "X-Pay-Signature: %s", sig);
    const char *h[] = {th, sh, NULL};
    return th_request("POST", url, h, body);
}

static void expect_paid_outcome(const struct th_resp *r, bool replayed)
{
    if (r->status != 200)
        fail_msg("callback: %ld %s", r->status, r->body);
    json_t *j = th_json(r);
    assert_string_equal(json_string_value(json_object_get(j, "outcome")), "APPLIED");
    assert_int_equal(json_is_true(json_object_get(j, "replayed")), replayed);
    json_decref(j);
}

/* An order of user under key, paid, its points credited and ticketed;
 * its number into no. */
static void paid_order(const struct th_server *s, int64_t user, const char *key, char no[32])
{
    char tok[96];
    int64_t session = th_session(s, 10, 1500);
    th_order_token(s, user, tok);
    struct th_resp r = th_order(s, user, key, tok, session, 1);
    if (r.status != 201)
        fail_msg("order: %ld %s", r.status, r.body);
    json_t *j = th_json(&r);
    snprintf(no, 32, "%s", json_string_value(json_object_get(j, "order_no")));
    json_decref(j);
    th_resp_free(&r);
    struct th_resp p = pay(s, "gw-retained", no);
    expect_paid_outcome(&p, false);
    th_resp_free(&p);
    th_wait_db(15, WAIT_MS, "points",
               "SELECT COALESCE(SUM(points), 0) FROM user_points "
               "WHERE user_id = %lld",
               (long long)user);
    th_wait_db(1, WAIT_MS, "ticketed",
               "SELECT COUNT(*) FROM orders WHERE order_no = '%s' AND "
               "status = 'TICKETED'",
               no);
    th_wait_db(2, WAIT_MS, "dedup rows", "SELECT COUNT(*) FROM consume_records");
}

/* The order.paid event of no again in the stream, as a redelivery that
 * comes after its dedup rows (and its outbox row) are gone. */
static void redeliver(const char *no, int64_t user)
{
    char payload[512];
    snprintf(payload, sizeof payload,
             "{\"event_type\":\"order.paid\",\"order_no\":\"%s\",\"order_id\":1,\"user_id\":%lld,"
             "\"session_id\":1,\"quantity\":1,\"amount_cents\":1500,\"txn_id\":\"gw-retained\","
             "\"occurred_at\":\"2026-12-01T08:00:00Z\"}",
             no, (long long)user);
    char *id = th_redis_text("XADD %s * outbox_id 1 event_type order.paid biz_key %s payload %s",
                             STREAM, no, payload);
    assert_non_null(id);
    free(id);
}

static int64_t points_of(int64_t user)
{
    return th_db_int("SELECT COALESCE((SELECT points FROM user_points WHERE user_id = %lld), 0)",
                     (long long)user);
}

/* What the business tables hold for the test's one order, as one string. */
static int64_t business_rows(void)
{
    return th_db_int("SELECT (SELECT COUNT(*) FROM orders) * 1000000 + "
                     "(SELECT COUNT(*) FROM payments) * 10000 + "
                     "(SELECT COUNT(*) FROM order_history) * 100 + "
                     "(SELECT COUNT(*) FROM points_ledger)");
}

static void test_business_tables_answer_after_the_window(void **state)
{
    char no[32];
    (void)state;
    const char *env[] = {FAST_ENV, "TICKETD_ENV=test", NULL};
    struct th_server *srv = th_serve(0, env);
    const int64_t user = 4201;
    paid_order(srv, user, "retained-1", no);
    int64_t business = business_rows();
    assert_int_equal(business, 1010301); /* 1 order, 1 payment, 3 history rows, 1 ledger row */

    /* A second server whose retention job lives twelve days ahead: the
     * partitions of today and of the days the first server split off ahead
     * are past their 7 days, and are dropped. */
    const char *late[] = {FAST_ENV, "TICKETD_ENV=test", today_plus(12),
                          "TICKETD_RETENTION_INTERVAL_MS=200", NULL};
    struct th_server *job = th_serve(1, late);
    th_wait_metric(job, "ticketd_partitions_dropped_total{table=\"consume_records\"}", 1, WAIT_MS);
    th_wait_metric(job, "ticketd_partitions_dropped_total{table=\"outbox\"}", 1, WAIT_MS);
    th_wait_metric(job, "ticketd_partitions_dropped_total{table=\"dead_letters\"}", 1, WAIT_MS);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM consume_records"), 0);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM outbox"), 0);
    assert_int_equal(
        th_metric(job, "ticketd_retained_oldest_age_seconds{table=\"consume_records\"}"), -1);
    assert_int_equal(day_partitions("consume_records"), 4); /* the job's today and 3 ahead */
    assert_int_equal(business_rows(), business);
    th_stop_clean(job);

    /* Redis forgets too, its records of the order and of the callback, and
     * so does the process that answered (its in-process response cache):
     * the retries meet a new one. */
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    th_stop_clean(srv);
    srv = th_serve(3, env);

    /* The order retried: answered from orders, by the unique index. */
    char tok[96];
    th_order_token(srv, user, tok);
    int64_t session = th_db_int("SELECT session_id FROM orders WHERE order_no = '%s'", no);
    struct th_resp again = th_order(srv, user, "retained-1", tok, session, 1);
    assert_int_equal(again.status, 201); /* as the order was first answered */
    th_expect_layer(&again, "unique-index");
    json_t *j = th_json(&again);
    assert_string_equal(json_string_value(json_object_get(j, "order_no")), no);
    json_decref(j);
    th_resp_free(&again);

    /* The callback replayed: its stored outcome, from payments. */
    struct th_resp p = pay(srv, "gw-retained", no);
    expect_paid_outcome(&p, true);
    th_resp_free(&p);

    /* The event redelivered: the points ledger refuses the second credit. */
    redeliver(no, user);
    th_wait_metric(srv, "ticketd_events_duplicates_skipped_total{consumer=\"points\"}", 1, WAIT_MS);
    th_wait_metric(srv, "ticketd_events_duplicates_skipped_total{consumer=\"ticketing\"}", 1,
                   WAIT_MS);
    assert_int_equal(points_of(user), 15);
    assert_int_equal(business_rows(), business);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders"), 1);
    th_stop_clean(srv);
}

/* The demo without the ledger: the same late redelivery credits again,
 * and the damage is counted in points. */
static void test_demo_late_redelivery_credits_twice(void **state)
{
    char no[32];
    (void)state;
    const char *env[] = {FAST_ENV, "TICKETD_ENV=demo",
                         "TICKETD_DEFENSES=-business-key-after-expiry", NULL};
    struct th_server *srv = th_serve(2, env);
    const int64_t user = 4202;
    paid_order(srv, user, "retained-2", no);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM points_ledger"), 0);

    /* Within the window the dedup row still stops a redelivery. */
    redeliver(no, user);
    th_wait_metric(srv, "ticketd_events_duplicates_skipped_total{consumer=\"points\"}", 1, WAIT_MS);
    assert_int_equal(points_of(user), 15);

    const char *late[] = {"TICKETD_ENV=demo", "TICKETD_DEFENSES=-business-key-after-expiry",
                          today_plus(12), NULL};
    char *out = partitions(late);
    assert_non_null(strstr(out, "consume_records: 4 day partitions, 4 added, 4 dropped"));
    free(out);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM consume_records"), 0);

    /* Beyond it nothing does: 15 points paid out a second time. */
    redeliver(no, user);
    th_wait_db(30, WAIT_MS, "points credited twice",
               "SELECT COALESCE(SUM(points), 0) FROM user_points WHERE user_id = %lld",
               (long long)user);
    long long damage = (long long)points_of(user) - 15;
    print_message("late redelivery without the ledger: %lld double-credited points\n", damage);
    assert_int_equal(damage, 15);
    /* Ticketing still moved once: its state machine is its business key. */
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history WHERE cause = 'ticket'"), 1);
    th_stop_clean(srv);
}

/* A cart of two items under batch key "cart-late" for user, with a token. */
static struct th_resp late_cart(const struct th_server *s, int64_t user, int64_t s1, int64_t s2)
{
    char tok[96], tok_h[160], body[256];
    th_order_token(s, user, tok);
    snprintf(tok_h, sizeof tok_h, "X-Order-Token: %s", tok);
    snprintf(body, sizeof body,
             "{\"items\":[{\"key\":\"late-1\",\"session_id\":%lld,\"quantity\":1},"
             "{\"key\":\"late-2\",\"session_id\":%lld,\"quantity\":2}]}",
             (long long)s1, (long long)s2);
    const char *h[] = {th_auth_header(user, false), "Idempotency-Key: cart-late", tok_h, NULL};
    return th_call(s, "POST", "/api/v1/orders/batch", h, body);
}

/* A cart's record past its window is dropped with its partition; the
 * retry, Redis forgetful too, is answered the same from its items' orders
 * (under their item keys), and buys nothing again. */
static void test_cart_answered_after_its_record_is_dropped(void **state)
{
    (void)state;
    const char *env[] = {"TICKETD_ENV=test", NULL};
    const int64_t user = 4203;
    struct th_server *srv = th_serve(0, env);
    int64_t s1 = th_session(srv, 10, 1000), s2 = th_session(srv, 10, 500);
    struct th_resp first = late_cart(srv, user, s1, s2);
    assert_int_equal(first.status, 200);
    assert_int_equal(
        th_db_int("SELECT COUNT(*) FROM idempotency_records WHERE user_id = %lld", (long long)user),
        1);
    th_stop_clean(srv);

    const char *late[] = {"TICKETD_ENV=test", today_plus(12), NULL};
    char *out = partitions(late);
    assert_non_null(strstr(out, "idempotency_records: 4 day partitions, 4 added, 4 dropped"));
    free(out);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM idempotency_records"), 0);
    assert_int_equal(day_partitions("idempotency_records"), 4);

    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    srv = th_serve(1, env);
    struct th_resp again = late_cart(srv, user, s1, s2);
    assert_int_equal(again.status, 200);
    th_expect_layer(&again, "unique-index");
    assert_string_equal(again.body, first.body);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders WHERE user_id = %lld", (long long)user),
                     2);
    assert_int_equal(th_stock_of(s1), 9);
    assert_int_equal(th_stock_of(s2), 8);
    /* The answer is kept again, final, for the next retry. */
    assert_int_equal(
        th_db_int("SELECT complete FROM idempotency_records WHERE user_id = %lld", (long long)user),
        1);
    th_resp_free(&first);
    th_resp_free(&again);
    th_stop_clean(srv);
}

/* Rows still to be relayed, and open dead letters, keep their partition
 * past its retention; a dedup row's partition goes. Run by the command
 * alone, no server, so nothing relays while the test looks. */
static void test_guards_keep_work_not_history(void **state)
{
    (void)state;
    const char *now[] = {"TICKETD_ENV=test", NULL};
    free(partitions(now));
    th_db_exec(
        "INSERT INTO outbox (event_type, biz_key, payload) VALUES ('order.paid', 'g1', '{}')");
    th_db_exec("INSERT INTO consume_records (consumer, biz_key) VALUES ('points', 'points:g1')");
    th_db_exec("INSERT INTO dead_letters (consumer, biz_key, outbox_id, stream_id, deliveries, "
               "reason) VALUES ('points', 'points:g1', 1, '1-0', 5, 'test')");

    const char *late[] = {"TICKETD_ENV=test", today_plus(12), NULL};
    char *out = partitions(late);
    assert_non_null(strstr(out, "kept for rows still needed"));
    free(out);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM consume_records"), 0);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM outbox"), 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM dead_letters"), 1);

    /* Relayed and re-driven, they are history: the next round drops them. */
    th_db_exec("UPDATE outbox SET published_at = UTC_TIMESTAMP(3)");
    th_db_exec("UPDATE dead_letters SET replayed_at = UTC_TIMESTAMP(3), replay_result = 'applied'");
    free(partitions(late));
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM outbox"), 0);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM dead_letters"), 0);
}

static int64_t alter_tables(void)
{
    return th_db_int("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                     "WHERE VARIABLE_NAME = 'COM_ALTER_TABLE'");
}

/* Two instances whose rounds overlap. The first is held between listing
 * the partitions and its first ALTER, holding the retention lease; the
 * second's rounds meanwhile change nothing. Released, the first splits
 * the days off alone: one ALTER per table, none refused for another's.
 * Without the lease the second splits them while the first is held, and
 * the first's ALTER then fails for a partition that is already there. */
static void test_one_instance_at_a_time_changes_partitions(void **state)
{
    (void)state;
    struct th_release release;
    th_release_init(&release, "retention");
    const char *held[] = {"TICKETD_ENV=test", "TICKETD_FAULT=retention.before_ddl:hold:60000:1",
                          release.env, NULL};
    const char *often[] = {"TICKETD_ENV=test", "TICKETD_RETENTION_INTERVAL_MS=100", NULL};
    int64_t alters = alter_tables();
    struct th_server *first = th_serve(0, held);
    th_wait_held(first, "retention.before_ddl");
    struct th_server *second = th_serve(1, often);
    th_wait_metric(second, "ticketd_retention_rounds_deferred_total", 2, WAIT_MS);
    for (size_t i = 0; i < sizeof retained / sizeof retained[0]; i++)
        assert_int_equal(day_partitions(retained[i]), 0);
    assert_int_equal(alter_tables() - alters, 0);

    /* `ticketd partitions` by hand meanwhile waits for the lease. */
    const char *args[] = {"partitions", NULL};
    const char *now[] = {"TICKETD_ENV=test", NULL};
    struct th_cli cli;
    th_cli_start(&cli, args, now);
    for (int i = 0; i < WAIT_MS / 20 && !th_file_contains(cli.out_path, "waiting up to"); i++)
        th_msleep(20);
    assert_true(th_file_contains(cli.out_path, "waiting up to"));

    th_release_now(&release);
    for (size_t i = 0; i < sizeof retained / sizeof retained[0]; i++)
        th_wait_db(4, WAIT_MS, "today and 3 days ahead", DAY_PARTITIONS_SQL, retained[i]);
    /* The second's rounds go on and take the lease in turn (it names
     * them by host, pid and tag), finding nothing left to change. */
    th_wait_db(1, WAIT_MS, "the second instance holding the lease",
               "SELECT COUNT(*) FROM job_leases WHERE job = 'retention' AND holder LIKE '%%-%d-%%'",
               (int)second->pid);
    assert_true(th_log_contains(second, "holds the retention lease"));
    assert_int_equal(th_metric(first, "ticketd_partition_ddl_conflicts_total"), 0);
    assert_int_equal(th_metric(second, "ticketd_partition_ddl_conflicts_total"), 0);
    /* The command took it in turn, and found nothing left either. */
    assert_int_equal(th_cli_wait(&cli), 0);
    assert_non_null(strstr(cli.out, "outbox: 4 day partitions, 0 added"));
    assert_null(strstr(cli.out, "left to the lease's holder"));
    assert_null(strstr(cli.out, "made by another instance"));
    th_cli_free(&cli);
    th_stop_clean(first);
    th_stop_clean(second);
    assert_int_equal(alter_tables() - alters, 4);
    th_release_done(&release);
}

/* An instance that died holding the lease leaves it to run out (the
 * database's clock), and the next round takes it then. */
static void test_a_dead_holders_lease_runs_out(void **state)
{
    (void)state;
    th_db_exec("INSERT INTO job_leases (job, holder, expires_at) VALUES "
               "('retention', 'gone-host-1', UTC_TIMESTAMP(6) + INTERVAL 2 SECOND)");
    const char *now[] = {"TICKETD_ENV=test", NULL};
    char *out = partitions(now);
    assert_non_null(strstr(out, "consume_records: 4 day partitions, 4 added"));
    assert_null(strstr(out, "left to the lease's holder"));
    free(out);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM job_leases WHERE holder = 'gone-host-1'"), 0);
}

/* A lease another instance holds past the command's wait: `ticketd
 * partitions --wait 1` gives up, says who holds it, exits 1 and changes
 * nothing; the holder's lease is left as it was. */
static void test_a_held_lease_outlasts_the_wait(void **state)
{
    (void)state;
    th_db_exec("INSERT INTO job_leases (job, holder, expires_at) VALUES "
               "('retention', 'busy-host-7', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)");
    int64_t alters = alter_tables();
    const char *args[] = {"partitions", "--wait", "1", NULL};
    const char *now[] = {"TICKETD_ENV=test", NULL};
    char *out = NULL;
    assert_int_equal(th_cli(args, now, &out), 1);
    assert_non_null(strstr(out, "busy-host-7 holds the retention lease; waiting up to 1000 ms"));
    assert_non_null(strstr(out, "left to the lease's holder"));
    free(out);
    for (size_t i = 0; i < sizeof retained / sizeof retained[0]; i++)
        assert_int_equal(day_partitions(retained[i]), 0);
    assert_int_equal(alter_tables() - alters, 0);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM job_leases WHERE holder = 'busy-host-7' "
                               "AND expires_at > UTC_TIMESTAMP(6) + INTERVAL 50 MINUTE"),
                     1);

    /* --wait 0 does not wait at all, and a bad value changes nothing. */
    const char *at_once[] = {"partitions", "--wait", "0", NULL};
    assert_int_equal(th_cli(at_once, now, &out), 1);
    assert_null(strstr(out, "waiting up to"));
    free(out);
    const char *bad[] = {"partitions", "--wait", "soon", NULL};
    struct th_cli cli;
    th_cli_start(&cli, bad, now);
    assert_int_equal(th_cli_wait(&cli), 2);
    assert_true(th_file_contains(cli.err_path, "--wait must be a number of seconds"));
    th_cli_free(&cli);
    assert_int_equal(alter_tables() - alters, 0);
}

/* The clock may move only where the data is a test's or a demo's. */
static void test_moved_clock_refused_in_production(void **state)
{
    (void)state;
    const char *args[] = {"partitions", NULL};
    const char *env[] = {"TICKETD_ENV=production", today_plus(12), NULL};
    char *out = NULL;
    assert_int_not_equal(th_cli(args, env, &out), 0);
    free(out);
    assert_int_equal(day_partitions("consume_records"), 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, th_teardown_stop)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_business_tables_answer_after_the_window),
        T(test_demo_late_redelivery_credits_twice),
        T(test_cart_answered_after_its_record_is_dropped),
        T(test_guards_keep_work_not_history),
        T(test_one_instance_at_a_time_changes_partitions),
        T(test_a_dead_holders_lease_runs_out),
        T(test_a_held_lease_outlasts_the_wait),
        T(test_moved_clock_refused_in_production),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
