/* Dead letters against the real binary, Redis and MariaDB: `ticketd
 * dead-letters list` shows what the consumers gave up on, and `ticketd
 * dead-letters replay` re-drives it once its cause is fixed, applying each
 * business key at most once however often, and from however many
 * processes at once, it is run. Orders and their outbox rows are written by
 * SQL, the way the payment transaction writes them. */
#include "harness.h"

#include "util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define WAIT_MS 20000

#define FAST_ENV "TICKETD_CLAIM_IDLE_MS=500", "TICKETD_CONSUMER_BLOCK_MS=100"
/* Every delivery fails before its effect, so each event is given up on
 * after its deliveries are used up: both groups dead-letter it with
 * "too many deliveries", a cause that is gone once the process is. */
#define FAILING_ENV                                                                                \
    "TICKETD_FAULT=consumer.before_effect:fail", "TICKETD_CLAIM_IDLE_MS=100",                      \
        "TICKETD_CONSUMER_BLOCK_MS=50", "TICKETD_MAX_DELIVERIES=2"

/* ---- helpers ---- */

static int64_t amount_of(int i)
{
    return 250 + 100 * i; /* 2 + i points */
}

/* The order, in status (version 2 for PAID, as after its payment). */
static void insert_order(int tag, int i, const char *status)
{
    char no[21];
    th_order_no(tag, i, no);
    th_db_exec("INSERT INTO orders (order_no, user_id, session_id, request_id, quantity, "
               "amount_cents, status, version) VALUES ('%s', %lld, 1, 'req-%s', 1, %lld, '%s', 2)",
               no, (long long)th_user_of(tag, i), no, (long long)amount_of(i), status);
}

/* The order.paid outbox row of order i, as the payment transaction writes it. */
static void insert_event(int tag, int i)
{
    char no[21];
    th_order_no(tag, i, no);
    th_db_exec("INSERT INTO outbox (event_type, biz_key, payload) VALUES ('order.paid', '%s', "
               "'{\"event_type\":\"order.paid\",\"order_no\":\"%s\",\"user_id\":%lld,"
               "\"amount_cents\":%lld}')",
               no, no, (long long)th_user_of(tag, i), (long long)amount_of(i));
}

static int64_t points_of(int tag, int i)
{
    return th_db_int("SELECT COALESCE((SELECT points FROM user_points WHERE user_id = %lld), 0)",
                     (long long)th_user_of(tag, i));
}

static int64_t tickets_of(int tag, int i)
{
    char no[21];
    th_order_no(tag, i, no);
    return th_db_int("SELECT COUNT(*) FROM order_history h JOIN orders o ON o.id = h.order_id "
                     "WHERE o.order_no = '%s' AND h.cause = 'ticket'",
                     no);
}

static int64_t letter_of(const char *consumer, int tag, int i)
{
    char no[21];
    th_order_no(tag, i, no);
    return th_db_int("SELECT id FROM dead_letters WHERE biz_key = '%s:%s'", consumer, no);
}

static int64_t open_letters(void)
{
    return th_db_int("SELECT COUNT(*) FROM dead_letters WHERE replayed_at IS NULL");
}

/* Lines of s that contain needle. */
static int count_lines(const char *s, const char *needle)
{
    int n = 0;
    for (const char *line = s; line != NULL && *line != '\0';) {
        const char *eol = strchr(line, '\n');
        size_t len = eol != NULL ? (size_t)(eol - line) : strlen(line);
        char *l = xstrndup(line, len);
        if (strstr(l, needle) != NULL)
            n++;
        free(l);
        line = eol != NULL ? eol + 1 : NULL;
    }
    return n;
}

/* `ticketd dead-letters ARGS...`: its exit status, its stdout in *out. */
static int dl(char **out, const char *a1, const char *a2, const char *a3, const char *a4)
{
    const char *args[] = {"dead-letters", a1, a2, a3, a4, NULL};
    return th_cli(args, NULL, out);
}

static int replay_id(int64_t id, char **out)
{
    char n[24];
    snprintf(n, sizeof n, "%lld", (long long)id);
    return dl(out, "replay", "--id", n, NULL);
}

/* Gives up on orders from..from+n-1 of tag in both groups ("too many
 * deliveries"), then stops the worker that did. */
static void dead_letter_both(int tag, int from, int n)
{
    const char *failing[] = {FAILING_ENV, NULL};
    struct th_server *w = th_worker("failing", failing);
    for (int i = from; i < from + n; i++)
        insert_event(tag, i);
    th_wait_db(2 * n, WAIT_MS, "dead letters",
               "SELECT COUNT(*) FROM dead_letters WHERE reason = 'too many "
               "deliveries' AND replayed_at IS NULL");
    assert_int_equal(th_stop(w), 0);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM consume_records"), 0);
}

/* The points_match_paid_orders check of GET /api/v1/admin/audit; its
 * detail is copied into detail. */
static bool audit_points(const struct th_server *s, char *detail, size_t cap)
{
    const char *h[] = {th_auth_header(1, true), NULL};
    struct th_resp r = th_call(s, "GET", "/api/v1/admin/audit", h, NULL);
    assert_int_equal(r.status, 200);
    json_t *j = th_json(&r), *checks = json_object_get(j, "checks"), *c;
    size_t i;
    bool ok = false, found = false;
    json_array_foreach(checks, i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "name")), "points_match_paid_orders") ==
            0) {
            found = true;
            ok = json_is_true(json_object_get(c, "ok"));
            snprintf(detail, cap, "%s", json_string_value(json_object_get(c, "detail")));
        }
    }
    assert_true(found);
    json_decref(j);
    th_resp_free(&r);
    return ok;
}

/* ---- tests ---- */

/* A ticketing letter for an order that does not exist (yet): listed,
 * still failing until the order is there, then applied exactly once. */
static void test_list_fix_replay_once(void **state)
{
    char *out = NULL;
    (void)state;
    const char *env[] = {FAST_ENV, NULL};
    struct th_server *w = th_worker("live", env);
    insert_event(21, 0);
    th_wait_db(1, WAIT_MS, "ticketing letter",
               "SELECT COUNT(*) FROM dead_letters WHERE consumer = 'ticketing' AND reason = 'no "
               "such order'");
    th_wait_db(1, WAIT_MS, "points applied",
               "SELECT COUNT(*) FROM consume_records WHERE consumer = 'points'");
    assert_int_equal(th_stop(w), 0);
    int64_t id = letter_of("ticketing", 21, 0);
    assert_true(id > 0);

    assert_int_equal(dl(&out, "list", NULL, NULL, NULL), 0);
    assert_non_null(strstr(out, "ticketing:21000000000000000000"));
    assert_non_null(strstr(out, "no such order"));
    free(out);
    assert_int_equal(dl(&out, "list", "--json", NULL, NULL), 0);
    json_t *j = json_loads(out, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "id")), id);
    assert_string_equal(json_string_value(json_object_get(j, "consumer")), "ticketing");
    assert_string_equal(json_string_value(json_object_get(j, "reason")), "no such order");
    assert_int_equal(json_integer_value(json_object_get(j, "outbox_id")),
                     th_db_int("SELECT MAX(id) FROM outbox"));
    json_decref(j);
    free(out);
    assert_int_equal(dl(&out, "list", "--json", "--consumer", "points"), 0);
    assert_string_equal(out, "");
    free(out);

    /* The cause is still there: the letter stays. */
    assert_int_equal(replay_id(id, &out), 1);
    assert_int_equal(count_lines(out, "still failing: no such order"), 1);
    free(out);
    assert_int_equal(open_letters(), 1);

    /* Fixed: applied once, the letter stamped in the same transaction. */
    insert_order(21, 0, "PAID");
    assert_int_equal(replay_id(id, &out), 0);
    assert_int_equal(count_lines(out, "): applied"), 1);
    free(out);
    assert_int_equal(tickets_of(21, 0), 1);
    assert_int_equal(th_db_int("SELECT version FROM orders WHERE status = 'TICKETED'"), 3);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM consume_records WHERE biz_key = "
                               "'ticketing:21000000000000000000'"),
                     1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM dead_letters WHERE id = %lld AND "
                               "replayed_at IS NOT NULL AND replay_result = 'applied'",
                               (long long)id),
                     1);
    assert_int_equal(dl(&out, "list", "--json", NULL, NULL), 0);
    assert_string_equal(out, "");
    free(out);

    /* Again, by id and all: nothing changes. */
    assert_int_equal(replay_id(id, &out), 0);
    assert_int_equal(count_lines(out, "already applied"), 2); /* its line and the summary */
    free(out);
    assert_int_equal(dl(&out, "replay", "--all", NULL, NULL), 0);
    assert_non_null(strstr(out, "0 applied, 0 already applied, 0 still failing"));
    free(out);
    assert_int_equal(tickets_of(21, 0), 1);
    assert_int_equal(th_db_int("SELECT version FROM orders"), 3);
    assert_int_equal(points_of(21, 0), 2);
}

/* Both groups gave up on paid orders; the audit sees the missing points
 * until the letters are re-driven, and the live consumers treat a copy
 * of a re-driven event as the duplicate it is. */
static void test_replay_all_audit_and_live_duplicates(void **state)
{
    char *out = NULL, detail[256];
    (void)state;
    for (int i = 0; i < 3; i++)
        insert_order(22, i, "PAID");
    dead_letter_both(22, 0, 3);
    const char *env[] = {FAST_ENV, NULL};
    struct th_server *s = th_serve(0, env);

    assert_false(audit_points(s, detail, sizeof detail));
    assert_non_null(strstr(detail, "3 open points dead letters"));

    assert_int_equal(dl(&out, "replay", "--all", "--consumer", "points"), 0);
    assert_int_equal(count_lines(out, "): applied"), 3);
    free(out);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(points_of(22, i), 2 + i);
        assert_int_equal(tickets_of(22, i), 0);
    }
    assert_true(audit_points(s, detail, sizeof detail));
    assert_int_equal(dl(&out, "list", "--consumer", "ticketing", "--json"), 0);
    assert_int_equal(count_lines(out, "\"consumer\":\"ticketing\""), 3);
    free(out);

    assert_int_equal(dl(&out, "replay", "--all", NULL, NULL), 0);
    assert_non_null(strstr(out, "3 applied, 0 already applied, 0 still failing"));
    free(out);
    assert_int_equal(open_letters(), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(tickets_of(22, i), 1);

    /* The relay publishes the events again: the live consumers find the
     * dedup rows the re-drive committed. */
    th_db_exec("UPDATE outbox SET published_at = NULL");
    th_wait_metric(s, "ticketd_events_duplicates_skipped_total{consumer=\"points\"}", 3, WAIT_MS);
    th_wait_metric(s, "ticketd_events_duplicates_skipped_total{consumer=\"ticketing\"}", 3,
                   WAIT_MS);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(points_of(22, i), 2 + i);
        assert_int_equal(tickets_of(22, i), 1);
    }
    assert_true(audit_points(s, detail, sizeof detail));
    assert_int_equal(th_stop(s), 0);
}

/* Two processes re-drive the same letters at once: each letter and each
 * business key is applied by exactly one of them. */
static void test_concurrent_replays(void **state)
{
    struct th_cli a, b;
    (void)state;
    const int n = 6;
    for (int i = 0; i < n; i++)
        insert_order(23, i, "PAID");
    dead_letter_both(23, 0, n);

    /* One letter, twice at once. */
    char id[24];
    snprintf(id, sizeof id, "%lld", (long long)letter_of("points", 23, 0));
    const char *one[] = {"dead-letters", "replay", "--id", id, NULL};
    th_cli_start(&a, one, NULL);
    th_cli_start(&b, one, NULL);
    assert_int_equal(th_cli_wait(&a), 0);
    assert_int_equal(th_cli_wait(&b), 0);
    assert_int_equal(count_lines(a.out, "): applied") + count_lines(b.out, "): applied"), 1);
    assert_int_equal(points_of(23, 0), 2);
    th_cli_free(&a);
    th_cli_free(&b);

    /* Every letter, twice at once. */
    const char *all[] = {"dead-letters", "replay", "--all", NULL};
    th_cli_start(&a, all, NULL);
    th_cli_start(&b, all, NULL);
    assert_int_equal(th_cli_wait(&a), 0);
    assert_int_equal(th_cli_wait(&b), 0);
    assert_int_equal(count_lines(a.out, "): applied") + count_lines(b.out, "): applied"),
                     2 * n - 1);
    assert_int_equal(count_lines(a.out, "still failing:") + count_lines(b.out, "still failing:"),
                     0);
    th_cli_free(&a);
    th_cli_free(&b);

    assert_int_equal(open_letters(), 0);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM dead_letters WHERE replay_result = "
                               "'applied'"),
                     2 * n);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM consume_records"), 2 * n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(points_of(23, i), 2 + i);
        assert_int_equal(tickets_of(23, i), 1);
    }
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders WHERE status = 'TICKETED' AND "
                               "version = 3"),
                     n);
}

/* Letters whose cause is still there stay open and make replay fail;
 * the others in the same run are applied. */
static void test_still_failing_stays_listed(void **state)
{
    char *out = NULL;
    (void)state;
    const char *env[] = {FAST_ENV, NULL};
    insert_order(24, 0, "CANCELLED");
    struct th_server *w = th_worker("live", env);
    insert_event(24, 0); /* an order the state machine cannot ticket */
    insert_event(24, 1); /* no such order */
    th_wait_db(2, WAIT_MS, "ticketing letters",
               "SELECT COUNT(*) FROM dead_letters WHERE consumer = 'ticketing'");
    th_wait_db(2, WAIT_MS, "points applied",
               "SELECT COUNT(*) FROM consume_records WHERE consumer = 'points'");
    assert_int_equal(th_stop(w), 0);

    assert_int_equal(dl(&out, "replay", "--all", NULL, NULL), 1);
    assert_int_equal(count_lines(out, "still failing: the order's state does not allow it"), 1);
    assert_int_equal(count_lines(out, "still failing: no such order"), 1);
    free(out);
    assert_int_equal(open_letters(), 2);
    assert_int_equal(dl(&out, "list", NULL, NULL, NULL), 0);
    assert_int_equal(count_lines(out, "ticketing:2400000000000000000"), 2);
    free(out);

    /* One cause fixed: that one applies, the other still fails. */
    insert_order(24, 1, "PAID");
    assert_int_equal(dl(&out, "replay", "--all", "--consumer", "ticketing"), 1);
    assert_non_null(strstr(out, "1 applied, 0 already applied, 1 still failing"));
    free(out);
    assert_int_equal(tickets_of(24, 1), 1);
    assert_int_equal(tickets_of(24, 0), 0);
    assert_int_equal(open_letters(), 1);
    assert_int_equal(letter_of("ticketing", 24, 0),
                     th_db_int("SELECT id FROM dead_letters WHERE replayed_at IS NULL"));
}

/* Another copy of the event got through after the letter was written:
 * re-driving the letter then only marks it. */
static void test_key_applied_meanwhile(void **state)
{
    char *out = NULL;
    (void)state;
    const char *env[] = {FAST_ENV, NULL};
    struct th_server *w = th_worker("live", env);
    insert_event(25, 0);
    th_wait_db(1, WAIT_MS, "ticketing letter", "SELECT COUNT(*) FROM dead_letters");
    int64_t id = letter_of("ticketing", 25, 0);

    /* The order arrives, and the relay publishes the event again. */
    insert_order(25, 0, "PAID");
    th_db_exec("UPDATE outbox SET published_at = NULL");
    th_wait_db(1, WAIT_MS, "ticketed by the live consumer",
               "SELECT COUNT(*) FROM orders WHERE status = 'TICKETED'");
    assert_int_equal(th_stop(w), 0);

    assert_int_equal(replay_id(id, &out), 0);
    assert_int_equal(count_lines(out, "already applied"), 2);
    free(out);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM dead_letters WHERE id = %lld AND "
                               "replay_result = 'already applied'",
                               (long long)id),
                     1);
    assert_int_equal(tickets_of(25, 0), 1);
    assert_int_equal(points_of(25, 0), 2);
    assert_int_equal(open_letters(), 0);
}

/* Wrong use is refused before anything is touched. */
static void test_usage(void **state)
{
    char *out = NULL;
    (void)state;
    assert_int_equal(dl(&out, "replay", NULL, NULL, NULL), 2);
    free(out);
    assert_int_equal(dl(&out, "replay", "--id", "1", "--all"), 2);
    free(out);
    assert_int_equal(dl(&out, "list", "--consumer", "nobody", NULL), 2);
    free(out);
    assert_int_equal(dl(&out, "replay", "--id", "999999", NULL), 1);
    free(out);
    const char *help[] = {"help", NULL};
    assert_int_equal(th_cli(help, NULL, &out), 0);
    assert_non_null(strstr(out, "ticketd dead-letters replay"));
    free(out);
}

/* Each test runs between these fixtures. */
#define T(f) cmocka_unit_test_setup_teardown(f, th_setup_fresh, th_teardown_kill)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_list_fix_replay_once),  T(test_replay_all_audit_and_live_duplicates),
        T(test_concurrent_replays),    T(test_still_failing_stays_listed),
        T(test_key_applied_meanwhile), T(test_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
