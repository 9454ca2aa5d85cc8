/* The replay lab's load tool (build/loadtest/ticketd-load) against two real
 * instances: with every defence on, its storms, double submissions, flash
 * sales, gateway retries and redelivered events do no damage; with one
 * defence switched off (TICKETD_ENV=demo), the damage it prevents shows up
 * in the tool's verdict and exit status. So the tool is checked against the
 * service, and each defence is shown to matter.
 *
 * The fault runs keep every defence on and break something mid-storm
 * (Redis flushed, an instance killed, MariaDB restarted, a downstream
 * slower than the TTLs, through the test build's fault points): the tool
 * retries as a client does, and neither damage nor an answer the contract
 * forbids may come out. A run that does get forbidden answers fails with
 * exit 2 like any other damage. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
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

/* Relative to the repository root, the tests' working directory. */
#define LOAD_BIN  "build/loadtest/ticketd-load"
#define REDELIVER "loadtest/redeliver.sh"
#define ARGS_MAX  48
/* ticketd-load bounds itself (--duration, --timeout, --settle); this only
 * catches a tool that hangs. */
#define LOAD_WAIT_S 90

static struct th_server srv[2];
static int nsrv;

static int setup(void **state)
{
    (void)state;
    th_reset();
    nsrv = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < nsrv; i++)
        assert_int_equal(th_stop(&srv[i]), 0);
    nsrv = 0;
    return 0;
}

/* Two instances sharing the test Redis and MariaDB, with extra settings. */
static void serve_two(const char *const *env)
{
    for (int i = 0; i < 2; i++) {
        th_start(&srv[i], th_port(i), env);
        nsrv++;
    }
}

/* Runs ticketd-load NAME ARGS... (NULL-terminated) against both instances
 * and returns its exit status; its figures are loaded from --json into
 * *out (new reference). Its output goes to a file in TICKETD_TEST_LOGS. */
static int lab_run(json_t **out, const char *name, ...)
{
    const char *logs = getenv("TICKETD_TEST_LOGS");
    char json_path[512], log_path[512], t0[64], t1[64];
    const char *argv[ARGS_MAX];
    int argc = 0;
    va_list ap;
    static int seq; /* one output file per run: several runs share a scenario */

    if (logs == NULL || logs[0] == '\0')
        logs = "/tmp";
    if (access(LOAD_BIN, X_OK) != 0)
        fail_msg("%s is missing: build it with make -C loadtest", LOAD_BIN);
    seq++;
    snprintf(json_path, sizeof json_path, "%s/replaylab-%s-%d-%d.json", logs, name, (int)getpid(),
             seq);
    snprintf(log_path, sizeof log_path, "%s/replaylab-%s-%d-%d.out", logs, name, (int)getpid(),
             seq);
    snprintf(t0, sizeof t0, "%s", srv[0].url);
    snprintf(t1, sizeof t1, "%s", srv[1].url);
    unlink(json_path);

    argv[argc++] = LOAD_BIN;
    argv[argc++] = name;
    va_start(ap, name);
    for (const char *a = va_arg(ap, const char *); a != NULL; a = va_arg(ap, const char *)) {
        assert_true(argc < ARGS_MAX - 16);
        argv[argc++] = a;
    }
    va_end(ap);
    const char *common[] = {"--target",
                            t0,
                            "--target",
                            t1,
                            "--jwt-secret",
                            TH_JWT_SECRET,
                            "--pay-secret",
                            TH_PAY_SECRET,
                            "--duration",
                            "20",
                            "--timeout",
                            "5000",
                            "--json",
                            json_path,
                            NULL};
    for (int i = 0; common[i] != NULL; i++)
        argv[argc++] = common[i];
    argv[argc] = NULL;

    int rc = th_run_logged(argv, log_path, LOAD_WAIT_S);
    json_error_t err;
    *out = json_load_file(json_path, 0, &err);
    if (*out == NULL)
        fail_msg("ticketd-load %s wrote no JSON (%s); see %s", name, err.text, log_path);
    if (rc != json_integer_value(json_object_get(*out, "exit_code")))
        fail_msg("ticketd-load %s exited %d but its JSON says %lld", name, rc,
                 (long long)json_integer_value(json_object_get(*out, "exit_code")));
    print_message("ticketd-load %s: exit %d, %s\n", name, rc, log_path);
    return rc;
}

static long long num(const json_t *j, const char *a, const char *b)
{
    const json_t *v = json_object_get(j, a);
    if (b != NULL)
        v = json_object_get(v, b);
    if (!json_is_integer(v))
        fail_msg("no integer %s%s%s in the JSON", a, b != NULL ? "." : "", b != NULL ? b : "");
    return (long long)json_integer_value(v);
}

/* Exit 0, nothing broken, no transport or server errors, audit all ok. */
static void expect_clean(const json_t *j, int rc)
{
    assert_int_equal(rc, 0);
    assert_int_equal(num(j, "damage", "total"), 0);
    assert_int_equal(num(j, "transport_errors", NULL), 0);
    assert_int_equal(num(j, "server_errors", NULL), 0);
    assert_true(json_is_true(json_object_get(json_object_get(j, "audit"), "ok")));
    assert_string_equal(json_string_value(json_object_get(j, "verdict")), "NO_DAMAGE");
    /* The time series accounts for every load request. */
    long long sum = 0;
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(json_object_get(j, "series"), "points"), i, p) sum +=
        (long long)json_integer_value(json_object_get(p, "requests"));
    assert_int_equal(sum, num(j, "requests", "total"));
}

/* A run under a fault: exit 0, no damage of any kind (forbidden answers
 * included), every request answered in the end, audit ok, and the fault
 * ran during the load and succeeded. Transport errors and 503s are allowed:
 * the client retried them. */
static void expect_held(const json_t *j, int rc)
{
    assert_int_equal(rc, 0);
    assert_int_equal(num(j, "damage", "total"), 0);
    assert_int_equal(num(j, "damage", "forbidden_answers"), 0);
    assert_int_equal(num(j, "forbidden_answers", "count"), 0);
    assert_int_equal(num(j, "unanswered", NULL), 0);
    assert_true(json_is_true(json_object_get(json_object_get(j, "audit"), "ok")));
    assert_string_equal(json_string_value(json_object_get(j, "verdict")), "NO_DAMAGE");
    const json_t *f = json_object_get(j, "fault");
    if (json_is_object(f)) {
        assert_int_equal(num(j, "fault", "exit_status"), 0);
        assert_true(json_is_true(json_object_get(f, "during_load")));
        /* Answers on both sides of it: some keys done before, some after. */
        assert_true(num(j, "fault", "answers_before") >= num(j, "fault", "after_answers"));
        assert_true(num(j, "fault", "answers_after") > 0);
    }
}

static long long replays_by(const json_t *j, const char *layer)
{
    const json_t *n =
        json_object_get(json_object_get(json_object_get(j, "replays"), "by_layer"), layer);
    return json_is_integer(n) ? (long long)json_integer_value(n) : 0;
}

static bool audit_check_fails(const json_t *j, const char *name)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(j, "audit"), "checks"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0)
            return !json_is_true(json_object_get(c, "ok"));
    }
    fail_msg("the audit has no check %s", name);
    return false;
}

/* ---- the replay test of docs/lab.md, loadtest/examples/replay.py ---- */

#define EXAMPLE "loadtest/examples/replay.py"

/* Runs the example against srv[0] with args (NULL-terminated) and --json;
 * returns its exit status, its JSON tally in *out (new reference). */
static int example_run(json_t **out, ...)
{
    const char *logs = getenv("TICKETD_TEST_LOGS");
    char json_path[512];
    const char *argv[ARGS_MAX];
    int argc = 0;
    va_list ap;

    snprintf(json_path, sizeof json_path, "%s/replay-example-%d.json",
             logs != NULL && logs[0] != '\0' ? logs : "/tmp", (int)getpid());
    const char *fixed[] = {"python3",      EXAMPLE,       "--url",  srv[0].url,
                           "--jwt-secret", TH_JWT_SECRET, "--json", NULL};
    for (int i = 0; fixed[i] != NULL; i++)
        argv[argc++] = fixed[i];
    va_start(ap, out);
    for (const char *a = va_arg(ap, const char *); a != NULL && argc < ARGS_MAX - 1;
         a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(json_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            close(fd);
        }
        execvp("python3", (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    for (int i = 0; waitpid(pid, &status, WNOHANG) != pid; i++) {
        if (i >= LOAD_WAIT_S * 20) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fail_msg("%s did not finish in %d s", EXAMPLE, LOAD_WAIT_S);
        }
        th_msleep(50);
    }
    assert_true(WIFEXITED(status));
    json_error_t err;
    *out = json_load_file(json_path, 0, &err);
    if (*out == NULL)
        fail_msg("%s exited %d and wrote no JSON (%s); see %s", EXAMPLE, WEXITSTATUS(status),
                 err.text, json_path);
    return WEXITSTATUS(status);
}

static long long answers_of(const json_t *j, const char *label)
{
    const json_t *n = json_object_get(json_object_get(j, "answers"), label);
    return json_is_integer(n) ? (long long)json_integer_value(n) : 0;
}

/* The example's copies, released together, meet the in-flight key of the
 * first: the first copy to pass Redis waits 400 ms before its transaction
 * (a fault point of the test build), so that every other copy arrives
 * while it is in flight however fast the machine is. One order comes out;
 * the copies are told REQUEST_IN_PROGRESS by the inflight-key layer (or,
 * when they are read after the first finished, replayed); nothing else. */
static void test_readme_replay_example(void **state)
{
    json_t *j = NULL;
    (void)state;
    const char *env[] = {"TICKETD_FAULT=order.after_redis:delay:400:1", NULL};
    th_start(&srv[0], th_port(0), env);
    nsrv = 1;

    int rc = example_run(&j, "--copies", "40", NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(json_array_size(json_object_get(j, "forbidden")), 0);
    assert_int_equal(json_array_size(json_object_get(j, "orders")), 1);
    assert_int_equal(answers_of(j, "201 @-"), 1);
    assert_true(answers_of(j, "409 REQUEST_IN_PROGRESS @inflight-key") > 0);
    assert_int_equal(answers_of(j, "201 @-") +
                         answers_of(j, "409 REQUEST_IN_PROGRESS @inflight-key") +
                         answers_of(j, "201 replayed @response-cache") +
                         answers_of(j, "201 replayed @unique-index"),
                     40);
    assert_string_equal(json_string_value(json_object_get(j, "retry")),
                        "201 replayed @response-cache");
    assert_int_equal(num(j, "stock_left", NULL), 8);
    const char *no = json_string_value(json_array_get(json_object_get(j, "orders"), 0));
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders WHERE order_no = '%s'", no), 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders"), 1);
    json_decref(j);
    assert_int_equal(th_stop(&srv[0]), 0);
    nsrv = 0;

    /* Its judge counts what it should: without the key layers, copies are
     * refused as double clicks while their key has its order. */
    const char *off[] = {"TICKETD_ENV=demo", "TICKETD_DEFENSES=-response-cache,-inflight-key",
                         env[0], NULL};
    th_start(&srv[0], th_port(0), off);
    nsrv = 1;
    rc = example_run(&j, "--copies", "40", NULL);
    assert_int_equal(rc, 1);
    assert_true(json_array_size(json_object_get(j, "forbidden")) > 0);
    assert_true(answers_of(j, "409 DUPLICATE_SUBMISSION @session-lock") > 0);
    json_decref(j);
}

/* ---- every defence on ---- */

static void test_storms_do_no_damage(void **state)
{
    json_t *j = NULL;
    (void)state;
    serve_two(NULL);

    int rc = lab_run(&j, "retry-storm", "--rounds", "40", "--copies", "6", NULL);
    expect_clean(j, rc);
    assert_int_equal(num(j, "orders_created", NULL), 40);
    assert_int_equal(num(j, "figures", "retry_storm.retries_replayed"), 40);
    json_decref(j);

    rc = lab_run(&j, "double-click", "--shared-token", "--rounds", "30", NULL);
    expect_clean(j, rc);
    assert_int_equal(num(j, "orders_created", NULL), 30);
    assert_int_equal(num(j, "figures", "double_click.bursts_one_order"), 30);
    json_decref(j);

    rc = lab_run(&j, "flash-sale", "--users", "60", "--seats", "8", NULL);
    expect_clean(j, rc);
    assert_int_equal(num(j, "orders_created", NULL), 8);
    assert_int_equal(num(j, "figures", "flash_sale.sold_out"), 52);
    json_decref(j);
}

static void test_payments_and_redelivered_events_do_no_damage(void **state)
{
    json_t *j = NULL;
    char redeliver[160];
    (void)state;
    const char *env[] = {"TICKETD_CONSUMER_BLOCK_MS=100", NULL};
    serve_two(env);

    int rc = lab_run(&j, "gateway-retry", "--orders", "20", "--settle", "15", NULL);
    expect_clean(j, rc);
    assert_true(num(j, "figures", "gateway_retry.paid") > 0);
    json_decref(j);

    /* Every event delivered a second time, under new entry ids: the
     * consumers' dedup rows keep the points single. */
    const char *port = getenv("TICKETD_TEST_REDIS_PORT");
    snprintf(redeliver, sizeof redeliver, "%s --port %s --wait 15", REDELIVER,
             port != NULL && port[0] != '\0' ? port : "26379");
    rc = lab_run(&j, "mq-redelivery", "--orders", "24", "--settle", "15", "--after-load", redeliver,
                 NULL);
    expect_clean(j, rc);
    assert_int_equal(num(j, "figures", "mq_redelivery.paid"), 24);
    json_decref(j);
}

/* ---- one defence off: the damage it prevents appears ---- */

static void test_without_stock_cas_the_sale_oversells(void **state)
{
    json_t *j = NULL;
    (void)state;
    const char *env[] = {"TICKETD_ENV=demo", "TICKETD_DEFENSES=-stock-cas", NULL};
    serve_two(env);
    assert_true(th_log_contains(&srv[0], "DEFENCE SWITCHED OFF: stock-cas"));

    /* Read-then-write stock: buyers that read the same stock all sell. */
    int rc = lab_run(&j, "flash-sale", "--users", "100", "--seats", "5", "--rounds", "3", NULL);
    assert_int_equal(rc, 2);
    assert_string_equal(json_string_value(json_object_get(j, "verdict")), "DAMAGE");
    long long oversold = num(j, "damage", "oversold_seats");
    assert_true(oversold > 0);
    assert_true(num(j, "orders_created", NULL) > 15);
    assert_true(audit_check_fails(j, "stock_conservation"));
    /* The database agrees: more seats in orders than the sales had. */
    assert_true(th_db_int("SELECT COALESCE(SUM(quantity), 0) FROM orders") > 15);
    json_decref(j);
}

/* GET /api/v1/admin/audit?sessions=... on srv[0]: the named check's
 * result, or the answer's status when it is not 200 (problem checked). */
static bool scoped_check_ok(const char *sessions, const char *name)
{
    char path[256];
    const char *admin[] = {th_auth_header(1, true), NULL};
    bool ok = false, found = false;
    size_t i;
    json_t *c;

    snprintf(path, sizeof path, "/api/v1/admin/audit?sessions=%s", sessions);
    struct th_resp r = th_call(&srv[0], "GET", path, admin, NULL);
    assert_int_equal(r.status, 200);
    json_t *j = th_json(&r);
    assert_true(json_is_array(json_object_get(json_object_get(j, "scope"), "sessions")));
    json_array_foreach(json_object_get(j, "checks"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0) {
            found = true;
            ok = json_is_true(json_object_get(c, "ok"));
        }
    }
    json_decref(j);
    th_resp_free(&r);
    if (!found)
        fail_msg("the scoped audit has no check %s", name);
    return ok;
}

static void expect_scope_refused(const char *query)
{
    char path[2048];
    const char *admin[] = {th_auth_header(1, true), NULL};

    snprintf(path, sizeof path, "/api/v1/admin/audit?sessions=%s", query);
    struct th_resp r = th_call(&srv[0], "GET", path, admin, NULL);
    th_expect_problem(&r, 400, "VALIDATION_FAILED");
    th_resp_free(&r);
}

/* A run's verdict is its own: after a run that oversold (left in the
 * database, no reset), the control run with the defence back on judges
 * its own sessions, says NO DAMAGE, and names the whole database's red
 * checks as left by earlier runs. */
static void test_control_run_after_damage_judges_its_own_run(void **state)
{
    json_t *j = NULL;
    char ids[1200] = "";
    (void)state;
    const char *off[] = {"TICKETD_ENV=demo", "TICKETD_DEFENSES=-stock-cas", NULL};
    serve_two(off);
    int rc = lab_run(&j, "flash-sale", "--users", "100", "--seats", "5", "--rounds", "3", NULL);
    assert_int_equal(rc, 2);
    assert_true(num(j, "damage", "oversold_seats") > 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "audit"), "scope")),
                        "run");
    json_decref(j);
    /* A session the run left unbalanced, as the audit judges it: without
     * the compare-and-set a round's race may also happen to sell its seats
     * right, so not every session of the run is. */
    int64_t damaged = th_db_int(
        "SELECT MIN(s.id) FROM sessions s WHERE s.capacity <> s.stock + (SELECT "
        "COALESCE(SUM(o.quantity), 0) FROM orders o WHERE o.session_id = s.id AND o.status <> "
        "'CANCELLED')");
    for (int i = 0; i < nsrv; i++)
        assert_int_equal(th_stop(&srv[i]), 0);
    nsrv = 0;

    serve_two(NULL);
    rc = lab_run(&j, "flash-sale", "--users", "100", "--seats", "5", "--rounds", "3", NULL);
    assert_int_equal(rc, 0);
    assert_string_equal(json_string_value(json_object_get(j, "verdict")), "NO_DAMAGE");
    assert_int_equal(num(j, "damage", "total"), 0);
    assert_int_equal(num(j, "orders_created", NULL), 15);
    json_t *audit = json_object_get(j, "audit");
    assert_true(json_is_true(json_object_get(audit, "ok")));
    json_t *whole = json_object_get(audit, "whole_database");
    assert_true(json_is_false(json_object_get(whole, "ok")));
    assert_true(num(audit, "whole_database", "earlier_runs_failed_checks") > 0);
    json_decref(j);

    /* The scope itself: the damaged session fails alone, a clean one
     * passes alone; bad lists are refused. */
    int64_t clean = th_db_int("SELECT MAX(id) FROM sessions");
    snprintf(ids, sizeof ids, "%lld", (long long)damaged);
    assert_false(scoped_check_ok(ids, "stock_conservation"));
    snprintf(ids, sizeof ids, "%lld", (long long)clean);
    assert_true(scoped_check_ok(ids, "stock_conservation"));
    assert_true(scoped_check_ok(ids, "points_match_paid_orders"));
    expect_scope_refused("abc");
    expect_scope_refused("1,,2");
    expect_scope_refused("0");
    expect_scope_refused("-3");
    expect_scope_refused("");
    size_t used = 0;
    for (int i = 1; i <= 257; i++)
        used += (size_t)snprintf(ids + used, sizeof ids - used, "%s%d", i > 1 ? "," : "", i);
    expect_scope_refused(ids);
}

static void test_without_callback_dedup_a_retry_refunds_the_payment(void **state)
{
    json_t *j = NULL;
    (void)state;
    const char *env[] = {"TICKETD_ENV=demo", "TICKETD_DEFENSES=-callback-dedup", NULL};
    serve_two(env);

    int rc = lab_run(&j, "gateway-retry", "--orders", "20", "--settle", "5", NULL);
    assert_int_equal(rc, 2);
    assert_true(num(j, "damage", "refunded_applied_payments") > 0);
    assert_true(audit_check_fails(j, "no_refund_of_applied_payment"));
    json_decref(j);
}

/* ---- every defence on, a fault mid-storm ---- */

/* The storm of the fault runs: 150 keys, each a token and 6 copies, some
 * 1,050 answers. The fault comes after 300 of them, by the load's progress
 * and not the clock, so that it lands in the storm's middle on a machine
 * twice as fast or twice as slow (a fault at 300 ms found the release
 * build's storm over). */
#define FAULT_STORM "--rounds", "150", "--copies", "6", "--fault-after", "300"

static void test_redis_flushed_mid_storm_does_no_damage(void **state)
{
    json_t *j = NULL;
    char cmd[160];
    (void)state;
    serve_two(NULL);

    const char *port = getenv("TICKETD_TEST_REDIS_PORT");
    snprintf(cmd, sizeof cmd, "redis-cli -h 127.0.0.1 -p %s FLUSHALL",
             port != NULL && port[0] != '\0' ? port : "26379");
    int rc = lab_run(&j, "retry-storm", FAULT_STORM, "--fault", cmd, NULL);
    expect_held(j, rc);
    /* Keys completed before the flush: their retries after the storm get
     * the order back from the database. */
    assert_true(replays_by(j, "unique-index") > 0);
    assert_int_equal(num(j, "figures", "retry_storm.keys_refused_with_order"), 0);
    json_decref(j);
}

static void test_instance_killed_mid_storm_does_no_damage(void **state)
{
    json_t *j = NULL;
    char cmd[64];
    (void)state;
    serve_two(NULL);

    snprintf(cmd, sizeof cmd, "kill -9 %d", (int)srv[1].pid);
    int rc = lab_run(&j, "retry-storm", FAULT_STORM, "--fault", cmd, NULL);
    /* Reap the killed instance; teardown stops the other one only. */
    th_kill(&srv[1]);
    nsrv = 1;
    expect_held(j, rc);
    /* The clients failed over: connections to the dead instance were
     * refused and the same requests went to the living one. */
    assert_true(num(j, "transport_errors", NULL) > 0);
    assert_true(num(j, "retries", "total") > 0);
    assert_int_equal(num(j, "figures", "retry_storm.keys_without_order"), 0);
    json_decref(j);
}

static void test_mysql_restarted_mid_storm_does_no_damage(void **state)
{
    json_t *j = NULL;
    char cmd[512];
    (void)state;
    serve_two(NULL);

    const char *st = getenv("TICKETD_TEST_STATE");
    if (st == NULL || st[0] == '\0')
        st = ".state/test";
    snprintf(cmd, sizeof cmd,
             "env -u TICKETD_MYSQL_HOST -u TICKETD_MYSQL_SOCKET scripts/services.sh stop-mysql %s "
             ">/dev/null 2>&1 && env -u TICKETD_MYSQL_HOST -u TICKETD_MYSQL_SOCKET "
             "scripts/services.sh start-mysql %s >/dev/null 2>&1",
             st, st);
    int rc = lab_run(&j, "retry-storm", FAULT_STORM, "--fault", cmd, NULL);
    expect_held(j, rc);
    /* While MariaDB was down the answers were 503 with Retry-After; the
     * retries created or replayed the orders. (A COMMIT whose answer was
     * lost to the restart reaches its client as a replay, so the database,
     * not the count of first answers, is the measure.) */
    assert_int_equal(num(j, "figures", "retry_storm.keys_without_order"), 0);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders"), 150);
    json_decref(j);
}

static void test_slow_downstream_copies_meet_the_unique_index(void **state)
{
    json_t *j = NULL;
    (void)state;
    /* Markers and locks live 300 ms; the first 24 orders of each instance
     * wait 800 ms between the Redis defences and their transaction. */
    const char *env[] = {"TICKETD_INFLIGHT_TTL_MS=300", "TICKETD_LOCK_TTL_MS=300",
                         "TICKETD_FAULT=order.after_redis:delay:800:24", NULL};
    serve_two(env);

    int rc = lab_run(&j, "retry-storm", "--rounds", "16", "--copies", "6", "--spread", "1000",
                     "--concurrency", "48", NULL);
    expect_held(j, rc);
    assert_int_equal(num(j, "orders_created", NULL), 16);
    /* Copies sent after the marker and the lock expired got past Redis;
     * the unique index answered them with the one order. */
    assert_true(replays_by(j, "unique-index") > 0);
    json_decref(j);
}

/* ---- the articles' pitfalls: each naive variant against the right code ---- */

/* Runs the same scenario with the defences of base and with one detail
 * switched off as well (off); returns the damage of kind `what` in each run. */
static void pitfall(const char *base, const char *off, const char *const *env_extra,
                    const char *what, long long *with, long long *without, const char *name,
                    const char *const *args)
{
    for (int pass = 0; pass < 2; pass++) {
        json_t *j = NULL;
        const char *env[12];
        int n = 0;
        char def[96];
        snprintf(def, sizeof def, "TICKETD_DEFENSES=%s", pass == 0 ? base : off);
        env[n++] = "TICKETD_ENV=demo";
        env[n++] = def;
        for (int i = 0; env_extra != NULL && env_extra[i] != NULL && n < 11; i++)
            env[n++] = env_extra[i];
        env[n] = NULL;
        th_reset();
        serve_two(env);
        if (pass == 1)
            assert_true(th_log_contains(&srv[0], "DEFENCE SWITCHED OFF: "));
        const char *a[16];
        int k = 0;
        for (; args[k] != NULL && k < 15; k++)
            a[k] = args[k];
        a[k] = NULL;
        int rc = lab_run(&j, name, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],
                         a[10], a[11], a[12], a[13], a[14], NULL);
        long long d = num(j, "damage", what);
        if (pass == 0) {
            *with = d;
            assert_int_equal(rc, 0);
        } else {
            *without = d;
            assert_int_equal(rc, 2);
        }
        json_decref(j);
        for (int i = 0; i < nsrv; i++)
            assert_int_equal(th_stop(&srv[i]), 0);
        nsrv = 0;
    }
    print_message("%s: %s %lld with the right code, %lld without\n", off, what, *with, *without);
    assert_int_equal(*with, 0);
    assert_true(*without > 0);
}

static void test_token_atomic(void **state)
{
    long long with, without;
    (void)state;
    /* The session lock off in both runs, so that only the token stands
     * between the two clicks of one form. */
    const char *args[] = {"--shared-token",
                          "--rounds",
                          "60",
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL};
    pitfall("-session-lock", "-session-lock,-token-atomic", NULL, "token_reused_orders", &with,
            &without, "double-click", args);
}

static void test_lock_owner_check(void **state)
{
    long long with, without;
    (void)state;
    /* Every order 600 ms slow, locks of 400 ms: click 1 outlives its lock,
     * click 2 takes it, click 1's release frees it, click 3 walks in. */
    const char *env[] = {"TICKETD_LOCK_TTL_MS=400", "TICKETD_FAULT=order.after_redis:delay:600",
                         NULL};
    const char *args[] = {"--burst",  "3",  "--gaps", "450,250", "--lock-ttl", "400",
                          "--rounds", "3",  NULL,     NULL,      NULL,         NULL,
                          NULL,       NULL, NULL,     NULL};
    pitfall("all", "-lock-owner-check", env, "lock_bypassed_orders", &with, &without,
            "double-click", args);
}

static void test_consumer_dedup_same_tx(void **state)
{
    long long with, without;
    (void)state;
    /* The first effects fail after their dedup row; redelivery follows. */
    const char *env[] = {"TICKETD_CONSUMER_BLOCK_MS=100", "TICKETD_CLAIM_IDLE_MS=300",
                         "TICKETD_FAULT=consumer.effect:fail:4", NULL};
    const char *args[] = {"--orders", "12", "--settle", "10", NULL, NULL, NULL, NULL,
                          NULL,       NULL, NULL,       NULL, NULL, NULL, NULL, NULL};
    pitfall("all", "-consumer-dedup-same-tx", env, "missing_points", &with, &without,
            "mq-redelivery", args);
}

static void test_consumer_dedup_business_key(void **state)
{
    long long with, without;
    char redeliver[160];
    (void)state;
    const char *port = getenv("TICKETD_TEST_REDIS_PORT");
    snprintf(redeliver, sizeof redeliver, "%s --port %s --wait 10", REDELIVER,
             port != NULL && port[0] != '\0' ? port : "26379");
    const char *env[] = {"TICKETD_CONSUMER_BLOCK_MS=100", NULL};
    const char *args[] = {"--orders", "12", "--settle", "10", "--after-load", redeliver,
                          NULL,       NULL, NULL,       NULL, NULL,           NULL,
                          NULL,       NULL, NULL,       NULL};
    pitfall("all", "-consumer-dedup-business-key", env, "double_credited_points", &with, &without,
            "mq-redelivery", args);
}

/* A double click on "cancel": two cancels of one order at once. */
struct cancel_ctx {
    const struct th_server *s;
    char order_no[32];
    long status[2];
};

static void cancel_once(int i, void *p)
{
    struct cancel_ctx *c = p;
    char path[96];
    snprintf(path, sizeof path, "/api/v1/orders/%s/cancel", c->order_no);
    const char *h[] = {th_auth_header(71, false), NULL};
    struct th_resp r = th_call(c->s, "POST", path, h, NULL);
    c->status[i] = r.status;
    th_resp_free(&r);
}

static void test_state_cas(void **state)
{
    long long stock[2];
    (void)state;
    /* 300 ms between reading the order and writing it. With the right code
     * the first cancel holds the row, the second then finds it cancelled;
     * without the predicate (state-cas off) both write, and both give the
     * seat back. */
    for (int pass = 0; pass < 2; pass++) {
        static struct cancel_ctx c;
        char tok[96], def[64];
        memset(&c, 0, sizeof c);
        snprintf(def, sizeof def, "TICKETD_DEFENSES=%s", pass == 0 ? "all" : "-state-cas");
        const char *env[] = {"TICKETD_ENV=demo", def,
                             "TICKETD_FAULT=order.before_transition:delay:300", NULL};
        th_reset();
        serve_two(env);
        c.s = &srv[0];
        int64_t s = th_session(&srv[0], 10, 100);
        for (int k = 0; k < 2; k++) {
            char key[16];
            snprintf(key, sizeof key, "cancel-%d", k);
            th_order_token(&srv[0], 71, tok);
            struct th_resp o = th_order(&srv[0], 71, key, tok, s, 1);
            assert_int_equal(o.status, 201);
            if (k == 0) {
                json_t *j = th_json(&o);
                snprintf(c.order_no, sizeof c.order_no, "%s",
                         json_string_value(json_object_get(j, "order_no")));
                json_decref(j);
            }
            th_resp_free(&o);
        }
        th_parallel(2, cancel_once, &c);
        assert_int_equal(c.status[0], 200);
        assert_int_equal(c.status[1], 200);
        stock[pass] = th_db_int("SELECT stock FROM sessions WHERE id = %lld", (long long)s);
        for (int i = 0; i < nsrv; i++)
            assert_int_equal(th_stop(&srv[i]), 0);
        nsrv = 0;
    }
    print_message("state-cas: stock after a double cancel %lld with the right code, %lld without "
                  "(10 seats, one order still holds one)\n",
                  stock[0], stock[1]);
    /* 10 seats, 2 orders of 1, one cancelled: 9 left. Without the CAS the
     * seat came back twice: 10 left while an order still holds one. */
    assert_int_equal(stock[0], 9);
    assert_int_equal(stock[1], 10);
}

static void test_forget_failures(void **state)
{
    long long with, without;
    (void)state;
    /* The first COMMITs' answers are lost: 503. Remembered, the 503 is
     * what every retry of those keys gets, though their orders exist. */
    const char *env[] = {"TICKETD_FAULT=order.commit_lost:fail:3", NULL};
    const char *args[] = {"--rounds", "20", "--copies", "3",  "--client-retries",
                          "2",        NULL, NULL,       NULL, NULL,
                          NULL,       NULL, NULL,       NULL, NULL,
                          NULL};
    pitfall("all", "-forget-failures", env, "failures_replayed", &with, &without, "retry-storm",
            args);
}

/* Carts under one key for the whole batch: the retry of a cart whose
 * scarce item sold out buys its other items again, and the item two carts
 * share is bought by each. With a key per item, every item key of a user
 * is one order. */
static void test_item_keys(void **state)
{
    long long with, without;
    (void)state;
    const char *args[] = {"--rounds", "20", "--copies", "3", NULL};
    pitfall("all", "-item-keys", NULL, "cart_items_bought_twice", &with, &without, "cart-storm",
            args);
}

/* Redis flushed between the orders and the refusals: the order-key filter
 * is empty. Believed anyway (-bloom-liveness), it refuses the retries whose
 * orders exist; not believed until rebuilt (no rebuild here), the database
 * is asked and each is answered with its order. No in-process answers, so
 * that every retry meets the filter. */
static void test_bloom_liveness(void **state)
{
    long long with, without;
    char flush[128];
    (void)state;
    snprintf(flush, sizeof flush, "redis-cli -h 127.0.0.1 -p %s FLUSHALL >/dev/null",
             getenv("TICKETD_TEST_REDIS_PORT") != NULL ? getenv("TICKETD_TEST_REDIS_PORT")
                                                       : "26379");
    const char *env[] = {"TICKETD_BLOOM_CHECK_MS=3600000", "TICKETD_RESPCACHE_ENTRIES=0", NULL};
    const char *args[] = {"--rounds", "30", "--midway", flush, NULL};
    pitfall("all", "-bloom-liveness", env, "wrong_refusals", &with, &without, "refusal-storm",
            args);
}

static void test_expired_records_late_retries_meet_the_unique_index(void **state)
{
    json_t *j = NULL;
    (void)state;
    const char *env[] = {"TICKETD_IDEM_TTL_S=1", NULL};
    serve_two(env);
    int rc = lab_run(&j, "retry-storm", "--rounds", "20", "--copies", "3", "--late", "2200", NULL);
    expect_held(j, rc);
    /* The records expired; the retries got their orders from the index. */
    assert_int_equal(num(j, "figures", "retry_storm.retries_replayed"), 20);
    assert_true(replays_by(j, "unique-index") > 0);
    json_decref(j);
}

/* ---- a forbidden answer is damage ---- */

static void test_forbidden_answers_fail_the_run(void **state)
{
    json_t *j = NULL;
    (void)state;
    /* Without the in-flight marker, copies of a key that meet the session
     * lock are told DUPLICATE_SUBMISSION while their key's order is being
     * made: no duplicate order, but an answer the contract forbids. */
    const char *env[] = {"TICKETD_ENV=demo", "TICKETD_DEFENSES=-response-cache,-inflight-key",
                         NULL};
    serve_two(env);

    int rc = lab_run(&j, "retry-storm", "--rounds", "30", "--copies", "6", NULL);
    assert_int_equal(rc, 2);
    assert_string_equal(json_string_value(json_object_get(j, "verdict")), "DAMAGE");
    assert_true(num(j, "damage", "forbidden_answers") > 0);
    assert_int_equal(num(j, "damage", "duplicate_orders"), 0);
    assert_int_equal(num(j, "damage", "total"), num(j, "damage", "forbidden_answers"));
    json_decref(j);

    /* The same run, told that answer is allowed with that defence off,
     * holds. */
    rc = lab_run(&j, "retry-storm", "--rounds", "30", "--copies", "6", "--allow",
                 "DUPLICATE_SUBMISSION", NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(num(j, "damage", "forbidden_answers"), 0);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_storms_do_no_damage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_payments_and_redelivered_events_do_no_damage, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_without_stock_cas_the_sale_oversells, setup, teardown),
        cmocka_unit_test_setup_teardown(test_control_run_after_damage_judges_its_own_run, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_readme_replay_example, setup, teardown),
        cmocka_unit_test_setup_teardown(test_without_callback_dedup_a_retry_refunds_the_payment,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_redis_flushed_mid_storm_does_no_damage, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_instance_killed_mid_storm_does_no_damage, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_mysql_restarted_mid_storm_does_no_damage, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_slow_downstream_copies_meet_the_unique_index, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_state_cas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forbidden_answers_fail_the_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_atomic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_owner_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_consumer_dedup_same_tx, setup, teardown),
        cmocka_unit_test_setup_teardown(test_consumer_dedup_business_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forget_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_item_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bloom_liveness, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expired_records_late_retries_meet_the_unique_index,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
