/* test_metrics.c - the Prometheus text of GET /metrics: the series the
 * dashboards and the demo read, HELP and TYPE once per name, counters and
 * the latency histogram by route and status. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "metrics.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Labels as boot.c hands them over at boot (the route table's own, in
 * the service); metrics know no router, so the test brings its own table:
 * a few real routes, then enough made-up ones to fill the renderer's
 * first buffer many times over. */
enum { R_LIVEZ, R_ORDERS_CREATE, R_ME, R_AUDIT, R_SESSION, R_FIRST_FILLER, R_COUNT = 24 };

static const char *labels[R_COUNT] = {
    [R_LIVEZ] = "/livez",
    [R_ORDERS_CREATE] = "/api/v1/orders",
    [R_ME] = "/api/v1/me",
    [R_AUDIT] = "/api/v1/admin/audit",
    [R_SESSION] = "/api/v1/sessions/{id}",
};

static int label_routes(void **state)
{
    (void)state;
    static char filler[R_COUNT][32];
    for (int i = R_FIRST_FILLER; i < R_COUNT; i++) {
        snprintf(filler[i], sizeof filler[i], "/api/v1/filler/%d", i);
        labels[i] = filler[i];
    }
    metrics_routes(labels, R_COUNT);
    return 0;
}

static char *render(void)
{
    size_t len = 0;
    char *text = metrics_render(&len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    return text;
}

/* True when text holds line as one whole line. */
static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++) {
        bool starts = p == text || p[-1] == '\n';
        if (starts && p[n] == '\n')
            return true;
    }
    return false;
}

static void assert_line(const char *text, const char *line)
{
    if (!has_line(text, line))
        fail_msg("no line '%s' in:\n%s", line, text);
}

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void test_counters_and_labels(void **state)
{
    (void)state;
    metrics_inc(M_ORDERS_CREATED);
    metrics_inc(M_ORDERS_CREATED);
    metrics_add(M_DUP_SESSION_LOCK, 3);
    metrics_inc(M_DUP_TOKEN);
    metrics_inc(M_DEP_ERRORS_REDIS);
    metrics_inc(M_REDIS_DEGRADED);
    metrics_set(M_OUTBOX_BACKLOG, 17);
    metrics_set(M_OUTBOX_BACKLOG, 5); /* a gauge is set, not added */
    assert_int_equal(metrics_get(M_ORDERS_CREATED), 2);
    assert_int_equal(metrics_get(M_OUTBOX_BACKLOG), 5);

    char *t = render();
    assert_line(t, "ticketd_orders_created_total 2");
    assert_line(t, "ticketd_stock_conflicts_total 0");
    assert_line(t, "ticketd_duplicates_blocked_total{layer=\"session-lock\"} 3");
    assert_line(t, "ticketd_duplicates_blocked_total{layer=\"token\"} 1");
    assert_line(t, "ticketd_duplicates_blocked_total{layer=\"response-cache\"} 0");
    assert_line(t, "ticketd_duplicates_blocked_total{layer=\"inflight-key\"} 0");
    assert_line(t, "ticketd_duplicates_blocked_total{layer=\"unique-index\"} 0");
    assert_line(t, "ticketd_dependency_errors_total{dependency=\"redis\"} 1");
    assert_line(t, "ticketd_dependency_errors_total{dependency=\"mysql\"} 0");
    assert_line(t, "ticketd_redis_degraded_requests_total 1");
    assert_line(t, "ticketd_transaction_retries_total{cause=\"deadlock\"} 0");
    assert_line(t, "ticketd_transaction_retries_total{cause=\"certification\"} 0");
    assert_line(t, "ticketd_outbox_backlog 5");
    assert_line(t, "ticketd_events_published_total 0");
    assert_line(t, "ticketd_events_consumed_total{consumer=\"points\"} 0");
    assert_line(t, "ticketd_events_consumed_total{consumer=\"ticketing\"} 0");
    assert_line(t, "# TYPE ticketd_outbox_backlog gauge");
    assert_line(t, "# TYPE ticketd_orders_created_total counter");
    free(t);

    metrics_add(M_ORDERS_CREATED, -2);
    t = render();
    assert_line(t, "ticketd_orders_created_total 0");
    free(t);
}

/* Every name has exactly one HELP and one TYPE line, before its samples:
 * Prometheus refuses a scrape with a repeated TYPE. */
static void test_help_and_type_once(void **state)
{
    (void)state;
    metrics_request(R_LIVEZ, 200, 0.0001);
    char *t = render();
    char *copy = strdup(t);
    char seen[64][96];
    int nseen = 0;
    for (char *line = strtok(copy, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char name[96];
        if (strncmp(line, "# TYPE ", 7) == 0) {
            sscanf(line + 7, "%95s", name);
            for (int i = 0; i < nseen; i++) {
                if (strcmp(seen[i], name) == 0)
                    fail_msg("TYPE of %s twice", name);
            }
            assert_true(nseen < 64);
            snprintf(seen[nseen++], sizeof seen[0], "%s", name);
            char help[128];
            snprintf(help, sizeof help, "# HELP %s ", name);
            assert_int_equal(count(t, help), 1);
        } else if (line[0] != '#') {
            /* A sample's name was typed before it. */
            size_t n = strcspn(line, "{ ");
            snprintf(name, sizeof name, "%.*s", (int)n, line);
            bool typed = false;
            for (int i = 0; i < nseen && !typed; i++) {
                size_t m = strlen(seen[i]);
                typed = strncmp(name, seen[i], m) == 0 &&
                        (name[m] == '\0' || strcmp(name + m, "_bucket") == 0 ||
                         strcmp(name + m, "_sum") == 0 || strcmp(name + m, "_count") == 0);
            }
            if (!typed)
                fail_msg("sample before its TYPE: %s", line);
            assert_int_equal(strncmp(name, "ticketd_", 8), 0);
        }
    }
    assert_true(nseen >= 15);
    free(copy);
    free(t);
}

static void test_requests_and_histogram(void **state)
{
    (void)state;
    metrics_request(R_ORDERS_CREATE, 201, 0.003);
    metrics_request(R_ORDERS_CREATE, 201, 0.0001);
    metrics_request(R_ORDERS_CREATE, 409, 7.0);   /* past the last bucket */
    metrics_request(R_ORDERS_CREATE, 418, 0.001); /* a status we never send */
    metrics_request(METRICS_ROUTE_UNMATCHED, 404, 0.0002);
    metrics_request(METRICS_ROUTE_NOT_ALLOWED, 405, 0.0002);
    metrics_request(R_COUNT, 404, 0.0002); /* no such index: unmatched */

    char *t = render();
    assert_line(t, "ticketd_http_requests_total{route=\"/api/v1/orders\",status=\"201\"} 2");
    assert_line(t, "ticketd_http_requests_total{route=\"/api/v1/orders\",status=\"409\"} 1");
    assert_line(t, "ticketd_http_requests_total{route=\"/api/v1/orders\",status=\"other\"} 1");
    assert_line(t, "ticketd_http_requests_total{route=\"(unmatched)\",status=\"404\"} 2");
    assert_line(t, "ticketd_http_requests_total{route=\"(method not allowed)\",status=\"405\"} 1");
    /* Series with no requests are not written. */
    assert_false(
        has_line(t, "ticketd_http_requests_total{route=\"/api/v1/orders\",status=\"200\"} 0"));

    /* Buckets are cumulative; le="0.001" holds the 0.0001 s and the
     * 0.001 s requests (bounds are inclusive), +Inf all four. */
    const char *b = "ticketd_http_request_duration_seconds_bucket{route=\"/api/v1/orders\"";
    char line[256];
    static const struct {
        const char *le;
        int n;
    } want[] = {{"0.0005", 1}, {"0.001", 2}, {"0.0025", 2}, {"0.005", 3},
                {"1", 3},      {"2.5", 3},   {"+Inf", 4}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        snprintf(line, sizeof line, "%s,le=\"%s\"} %d", b, want[i].le, want[i].n);
        assert_line(t, line);
    }
    assert_line(t, "ticketd_http_request_duration_seconds_count{route=\"/api/v1/orders\"} 4");
    const char *sum = "ticketd_http_request_duration_seconds_sum{route=\"/api/v1/orders\"} ";
    const char *at = strstr(t, sum);
    assert_non_null(at);
    double secs = strtod(at + strlen(sum), NULL);
    /* Summed in microseconds: within a few of 7.0041 s. */
    assert_true(secs > 7.00409 && secs < 7.00411);
    /* A route that saw nothing has no histogram. */
    assert_null(strstr(t, "duration_seconds_count{route=\"/api/v1/me\"}"));
    free(t);
}

/* The batch size histogram: each batch in the first bucket that holds it
 * (bounds inclusive), buckets cumulative, a batch past 64 only in +Inf;
 * _sum the orders, _count the batches. */
static void test_order_batch_histogram(void **state)
{
    (void)state;
    static const int sizes[] = {1, 1, 2, 3, 4, 5, 64, 65, 200};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        metrics_order_batch(sizes[i]);

    char *t = render();
    assert_line(t, "# TYPE ticketd_order_batch_size histogram");
    static const struct {
        const char *le;
        int n;
    } want[] = {{"1", 2},  {"2", 3},  {"4", 5},  {"8", 6},
                {"16", 6}, {"32", 6}, {"64", 7}, {"+Inf", 9}};
    char line[128];
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        snprintf(line, sizeof line, "ticketd_order_batch_size_bucket{le=\"%s\"} %d", want[i].le,
                 want[i].n);
        assert_line(t, line);
    }
    assert_line(t, "ticketd_order_batch_size_sum 345");
    assert_line(t, "ticketd_order_batch_size_count 9");
    free(t);
}

/* The batch time histogram: each time in the first bucket that holds it
 * (bounds inclusive), buckets cumulative, a time past 5 s only in +Inf;
 * _sum the seconds, summed in microseconds, _count the batches. */
static void test_order_batch_time_histogram(void **state)
{
    (void)state;
    static const double times[] = {0.0001, 0.00025, 0.0013, 0.0013, 0.0021, 0.3, 5, 7.5};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++)
        metrics_order_batch_time(times[i]);

    char *t = render();
    assert_line(t, "# TYPE ticketd_order_batch_seconds histogram");
    static const struct {
        const char *le;
        int n;
    } want[] = {{"0.00025", 2}, {"0.0005", 2}, {"0.001", 2}, {"0.002", 4}, {"0.004", 5},
                {"0.008", 5},   {"0.016", 5},  {"0.032", 5}, {"0.064", 5}, {"0.25", 5},
                {"1", 6},       {"5", 7},      {"+Inf", 8}};
    char line[128];
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        snprintf(line, sizeof line, "ticketd_order_batch_seconds_bucket{le=\"%s\"} %d", want[i].le,
                 want[i].n);
        assert_line(t, line);
    }
    const char *sum = "ticketd_order_batch_seconds_sum ";
    const char *at = strstr(t, sum);
    assert_non_null(at);
    double secs = strtod(at + strlen(sum), NULL);
    /* Summed in whole microseconds: within a few of 12.80505 s. */
    assert_true(secs > 12.80500 && secs < 12.80506);
    assert_line(t, "ticketd_order_batch_seconds_count 8");
    free(t);
}

static void test_render_grows_past_first_buffer(void **state)
{
    (void)state;
    /* Every route with every status and bucket: far more text than the
     * renderer's first buffer. */
    static const int statuses[] = {200, 201, 204, 400, 401, 403, 404, 405,
                                   409, 413, 415, 422, 500, 503, 299};
    for (int r = METRICS_ROUTE_NOT_ALLOWED; r < R_COUNT; r++) {
        for (size_t s = 0; s < sizeof statuses / sizeof statuses[0]; s++)
            metrics_request(r, statuses[s], 0.0004 * (double)(s + 1));
    }
    size_t len = 0;
    char *t = metrics_render(&len);
    assert_true(len > 16384);
    assert_int_equal(strlen(t), len);
    assert_int_equal(t[len - 1], '\n');
    assert_line(t, "ticketd_http_requests_total{route=\"/api/v1/admin/audit\",status=\"503\"} 1");
    assert_line(t,
                "ticketd_http_requests_total{route=\"/api/v1/sessions/{id}\",status=\"other\"} 1");
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters_and_labels),
        cmocka_unit_test(test_help_and_type_once),
        cmocka_unit_test(test_requests_and_histogram),
        cmocka_unit_test(test_order_batch_histogram),
        cmocka_unit_test(test_order_batch_time_histogram),
        cmocka_unit_test(test_render_grows_past_first_buffer),
    };
    return cmocka_run_group_tests(tests, label_routes, NULL);
}
