/*
 * selftest - checks of ticketd-load's pure parts: the histograms'
 * percentiles, the credentials it mints, the verdict's exit code (a
 * forbidden answer alone is damage; a transport error a retry recovered
 * from is no error), the option table's parser, and a request's long path. The expected JWTs and
 * callback signature were computed independently (HMAC-SHA256 and base64url of the same inputs), so
 * a mistake here cannot hide behind the code it tests.
 */
#include "hist.h"
#include "load_engine.h"
#include "load_sign.h"
#include "paysign.h"
#include "load_verdict.h"
#include "optable.h"

#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks;
static int failures;

static void check(int ok, const char *what)
{
    checks++;
    if (!ok) {
        fprintf(stderr, "FAIL: %s\n", what);
        failures++;
    }
}

static void within(double got, double want, double rel, const char *what)
{
    char msg[160];

    snprintf(msg, sizeof(msg), "%s: got %.1f, want %.1f", what, got, want);
    check(fabs(got - want) <= want * rel, msg);
}

static void test_hist(void)
{
    struct hist *h = calloc(1, sizeof(*h));
    struct hist *g = calloc(1, sizeof(*g));

    if (h == NULL || g == NULL)
        abort();
    hist_init(h);
    check(hist_percentile(h, 0.5) == 0, "empty histogram");
    for (uint64_t v = 1; v <= 100000; v++)
        hist_add(h, v);
    within((double)hist_percentile(h, 0.50), 50000, 0.005, "p50 of 1..100000");
    within((double)hist_percentile(h, 0.99), 99000, 0.005, "p99 of 1..100000");
    check(hist_percentile(h, 1.0) == 100000, "p100 is the max");
    within(hist_mean(h), 50000.5, 1e-9, "mean");

    hist_init(g);
    for (int i = 0; i < 99; i++)
        hist_add(g, 100);
    hist_add(g, 5000000);
    check(hist_percentile(g, 0.50) == 100, "small values are exact");
    check(hist_percentile(g, 0.99) == 100, "p99 of 99 x 100 and one outlier");
    within((double)hist_percentile(g, 0.995), 5000000, 0.002, "outlier bucket");
    hist_merge(h, g);
    check(h->count == 100100, "merge adds counts");
    check(h->max_us == 5000000, "merge keeps the max");
    free(h);
    free(g);
}

static void test_hist_small(void)
{
    struct hist_small h;
    struct hist_small g;

    memset(&h, 0, sizeof(h));
    memset(&g, 0, sizeof(g));
    check(hist_small_percentile(&h, 0.5) == 0, "empty small histogram");
    for (uint64_t v = 1; v <= 100000; v++)
        hist_small_add(&h, v);
    within((double)hist_small_percentile(&h, 0.50), 50000, 0.07, "small p50 of 1..100000");
    within((double)hist_small_percentile(&h, 0.99), 99000, 0.07, "small p99 of 1..100000");
    check(hist_small_percentile(&h, 1.0) == 100000, "small p100 is the max");
    for (int i = 0; i < 10; i++)
        hist_small_add(&g, 7);
    check(hist_small_percentile(&g, 0.5) == 7, "small values below 16 are exact");
    hist_small_add(&g, UINT64_C(1) << 40);
    check(hist_small_percentile(&g, 1.0) == UINT64_C(1) << 40, "a huge value is kept as the max");
    hist_small_merge(&h, &g);
    check(h.count == 100011, "small merge adds counts");
}

static void test_sign(void)
{
    static const char secret[] = "dev-jwt-secret-change-me-0123456789abcdef";
    static const char pay[] = "dev-pay-secret-change-me-0123456789abcdef";
    static const char body[] =
        "{\"txn_id\":\"t1\",\"order_no\":\"ABC\",\"amount_cents\":2000,\"status\":\"SUCCESS\"}";
    char jwt[SIGN_JWT_MAX];
    char hex[PAYSIGN_HEX_LEN];

    check(sign_jwt_at(secret, 42, 1, 1700000000, 1700003600, jwt, sizeof(jwt)) == 0,
          "admin JWT minted");
    check(strcmp(jwt, "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
                      "eyJzdWIiOiI0MiIsImlhdCI6MTcwMDAwMDAwMCwiZXhwIjoxNzAwMDAzNjAwLCJyb2xlIjoiYWR"
                      "taW4ifQ.KXkPlif4PRCBGOo5jzRMYbGwdzcU9e1lXk0sg-C5Wxk") == 0,
          "admin JWT matches the reference");
    check(sign_jwt_at(secret, 9007199254740991ULL, 0, 1700000000, 1700003600, jwt, sizeof(jwt)) ==
              0,
          "user JWT minted");
    check(strcmp(jwt, "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
                      "eyJzdWIiOiI5MDA3MTk5MjU0NzQwOTkxIiwiaWF0IjoxNzAwMDAwMDAwLCJleHAiOjE3MDAwMDM2"
                      "MDB9.q7GtKaNSrcsp_KHn5AEtQYKfPbRa9whJMDafmGxlhfU") == 0,
          "user JWT with the largest id matches the reference");
    check(sign_jwt_at("", 1, 0, 0, 1, jwt, sizeof(jwt)) == -1, "no JWT without a secret");
    check(sign_jwt_at(secret, 1, 0, 0, 1, jwt, 40) == -1, "no JWT into a short buffer");

    check(paysign(pay, "1700000000", body, strlen(body), hex) == 0, "callback signed");
    check(strcmp(hex, "6d5bcff6b246f279cfd2c47d1743ef797a15952ab856c9b9d84554fa94c1b7c5") == 0,
          "callback signature matches the reference");

    /* The example of the Standard Webhooks specification. */
    char sig[PAYSIGN_WEBHOOK_LEN];
    check(paysign_webhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
                          "1614265330", "{\"test\": 2432232314}", 20, sig) == 0,
          "delivery signed");
    check(strcmp(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=") == 0,
          "delivery signature matches the specification's");
    check(paysign_webhook("whsec_not-base64!", "m", "1", "{}", 2, sig) == -1,
          "no delivery signature with a broken whsec_ secret");
    check(paysign_webhook("", "m", "1", "{}", 2, sig) == -1,
          "no delivery signature without a secret");
}

static void test_exit_code(void)
{
    struct verdict *v = verdict_new();
    struct load_stats *st = load_stats_new();

    check(verdict_exit_code(v, st) == 0, "nothing seen: exit 0");
    /* Dropped connections and 503s the client's retries recovered from. */
    st->transport_errors[LOAD_ORDER] = 40;
    st->server_errors[LOAD_ORDER] = 12;
    st->retries[LOAD_ORDER] = 52;
    check(verdict_exit_code(v, st) == 0, "retried transport errors and 503s: exit 0");
    st->unanswered[LOAD_CONTROL] = 1;
    check(verdict_exit_code(v, st) == 0, "an unanswered check request is not a load error");
    st->unanswered[LOAD_ORDER] = 1;
    check(verdict_exit_code(v, st) == 1, "an order never answered for sure: exit 1");
    st->unanswered[LOAD_ORDER] = 0;
    verdict_observation(v, "3 paid orders not TICKETED after 20.0 s");
    check(verdict_exit_code(v, st) == 0, "an observation is not damage");
    verdict_anomaly(v, "retry-storm: a copy of key k answered 409 DUPLICATE_SUBMISSION");
    check(verdict_exit_code(v, st) == 2, "a forbidden answer alone: exit 2");
    check(verdict_damage_total(v) == 1, "one forbidden answer, one unit of damage");
    verdict_anomalies(v, 4, "retry-storm: key k has an order, yet 4 copies were refused");
    check(verdict_damage_total(v) == 5, "forbidden answers are counted in answers");
    st->unanswered[LOAD_ORDER] = 1;
    check(verdict_exit_code(v, st) == 2, "damage wins over errors");
    load_stats_free(st);
    verdict_free(v);
}

static void no_usage(FILE *out)
{
    (void)out;
}

/* Parses a NULL-terminated argument list by t; returns optable_parse's
 * answer. */
static int parse_args(const struct optable *t, const char *const *args)
{
    char *argv[24];
    int argc = 0;

    argv[argc++] = "selftest";
    for (; *args != NULL && argc < 23; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    optind = 0; /* a fresh getopt for each list */
    return optable_parse(t, argc, argv);
}

static void test_optable(void)
{
    struct {
        int n, count, sessions;
        long long ll;
        uint64_t id;
        double secs, ms;
        bool flag;
        const char *str;
    } v = {0};
    const struct optable_opt opts[] = {
        {"n", 0, OPTABLE_INT, &v.n, 1, 10, NULL, NULL},
        {"ll", 0, OPTABLE_LL, &v.ll, -5, 5, NULL, NULL},
        {"id", 0, OPTABLE_U64, &v.id, 1, (1LL << 53) - 1, NULL, NULL},
        {"secs", 0, OPTABLE_SECONDS, &v.secs, 0, 60, NULL, NULL},
        {"ms", 0, OPTABLE_MS, &v.ms, 0, 60000, NULL, NULL},
        {"flag", 0, OPTABLE_FLAG, &v.flag, 0, 0, NULL, NULL},
        {"hot", 0, OPTABLE_SET, &v.sessions, 1, 1, NULL, NULL},
        {"str", 0, OPTABLE_STR, &v.str, 0, 0, NULL, NULL},
        {"verbose", 'v', OPTABLE_COUNT, &v.count, 0, 0, NULL, NULL},
    };
    const struct optable t = {"selftest", no_usage, opts, (int)(sizeof(opts) / sizeof(opts[0]))};
    const char *good[] = {"--n",    "10", "--ll", "-5",  "--id",   "9007199254740991",
                          "--secs", "7",  "--ms", "250", "--flag", "--hot",
                          "--str",  "x",  "-vv",  NULL};
    const char *const bad[][3] = {
        {"--n", "0", NULL},     {"--n", "11", NULL},      {"--n", "3x", NULL},
        {"--ll", "", NULL},     {"--id", "0", NULL},      {"--ms", "60001", NULL},
        {"--nope", NULL, NULL}, {"--flag=1", NULL, NULL},
    };

    v.sessions = 100;
    check(parse_args(&t, good) == 0, "optable: every kind parses");
    check(v.n == 10 && v.ll == -5 && v.id == 9007199254740991ULL, "optable: numbers at the edges");
    check(v.secs == 7.0 && v.ms == 0.25, "optable: seconds, and milliseconds as seconds");
    check(v.flag && v.sessions == 1 && v.count == 2, "optable: flag, set and count");
    check(v.str != NULL && strcmp(v.str, "x") == 0, "optable: a string is the argument");
    fprintf(stderr, "(the next lines are the refusals the option parser is expected to print)\n");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char what[96];

        v.n = 5;
        snprintf(what, sizeof(what), "optable: %s %s is refused", bad[i][0],
                 bad[i][1] != NULL ? bad[i][1] : "");
        check(parse_args(&t, bad[i]) == -1, what);
        check(v.n == 5, "optable: a refused value is not stored");
    }
}

/* A fault counts as during the load only with answers before and after
 * it, and before the load ended. */
static void test_fault_during_load(void)
{
    static const struct {
        long long before, after;
        double started_s, load_end_s;
        bool during;
        const char *what;
    } rows[] = {
        {150, 700, 0.4, 2.0, true, "fault: answers on both sides is mid-load"},
        {0, 900, 0.0, 2.0, false, "fault: before the first answer is not mid-load"},
        {900, 0, 1.9, 2.0, false, "fault: after the last answer is not mid-load"},
        {900, 0, 2.5, 2.0, false, "fault: after the load ended is not mid-load"},
        {150, 700, -1, 2.0, false, "fault: one that never ran is not mid-load"},
    };

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct verdict_fault f = {.command = "true",
                                  .after_answers = 100,
                                  .at_s = -1,
                                  .answers_before = rows[i].before,
                                  .answers_after = rows[i].after,
                                  .started_s = rows[i].started_s,
                                  .load_end_s = rows[i].load_end_s};

        check(verdict_fault_during_load(&f) == rows[i].during, rows[i].what);
    }
}

/* A request keeps its path whole, however long: the scoped audit names up
 * to 200 sessions in its query, and a path cut short asked about a clipped
 * id, or ended at a comma and was refused 400. */
static void test_long_path(void)
{
    char want[200 * 21 + 64];
    size_t used = (size_t)snprintf(want, sizeof(want), "/api/v1/admin/audit?sessions=");
    struct load_req *r;

    for (int i = 0; i < 200; i++)
        used += (size_t)snprintf(want + used, sizeof(want) - used, "%s%d", i > 0 ? "," : "",
                                 1000003 + 3 * i);
    r = load_req_new(LOAD_CONTROL, "GET", "%s", want);
    check(strlen(want) > 1000, "long path: the audit path is longer than a kilobyte");
    check(strcmp(r->path, want) == 0, "long path: a request keeps its whole path");
    load_req_free(r);
}

int main(void)
{
    test_hist();
    test_hist_small();
    test_sign();
    test_exit_code();
    test_optable();
    test_fault_during_load();
    test_long_path();
    /* The last line, as scripts/run-tests.sh counts it. */
    printf("selftest: %d checks, %d failed\n", checks, failures);
    return failures > 0 ? 1 : 0;
}
