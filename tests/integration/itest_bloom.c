/* The order-key filter in front of the refusals' database look-up, against
 * the real binary, Redis and MariaDB: a trusted "certainly not" saves the
 * query; a filter that has not seen every order (Redis flushed, the order
 * older than the filter, Redis lost records) is not believed, and the
 * order that exists is found; believed anyway (the demo's naive variant),
 * the flushed filter refuses a retry whose order exists. */
#include "harness.h"

#include "util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define WAIT_MS 20000
#define STATE   "ticketd:bloom:{orders}:state"
#define N       40

/* A short check so a test waits for its build, not for the default. */
#define FAST_BUILD "TICKETD_BLOOM_CHECK_MS=200"
/* No build after the first: what a flush leaves stays as it is. */
#define NO_REBUILD "TICKETD_BLOOM_CHECK_MS=3600000"

static int setup(void **state)
{
    return th_setup_fresh(state);
}

/* An order of user under key on a new session; its session into *session. */
static void place(const struct th_server *s, int64_t user, const char *key, int64_t *session)
{
    char tok[96];
    *session = th_session(s, 100, 1500);
    th_order_token(s, user, tok);
    struct th_resp r = th_order(s, user, key, tok, *session, 1);
    if (r.status != 201)
        fail_msg("order: %ld %s", r.status, r.body);
    th_resp_free(&r);
}

/* Another request of user holds the session: the next order on it is
 * refused by Redis (DUPLICATE_SUBMISSION) unless the database has it. */
static void hold_session(int64_t user, int64_t session)
{
    assert_int_equal(th_redis_int("SET lock:order:{%lld}:%lld someone-else PX 60000",
                                  (long long)user, (long long)session),
                     0);
}

static struct th_resp retry(const struct th_server *s, int64_t user, const char *key,
                            int64_t session)
{
    char tok[96];
    th_order_token(s, user, tok);
    return th_order(s, user, key, tok, session, 1);
}

/* N refusals of keys that have no order, while another request holds the
 * session. Returns the database look-ups they cost. */
static long long refusal_storm(const struct th_server *s, int64_t user, int64_t session)
{
    char key[48];
    long long before = th_metric(s, "ticketd_refusal_db_lookups_total");
    hold_session(user, session);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "storm-%d", i);
        struct th_resp r = retry(s, user, key, session);
        th_expect_problem(&r, 409, "DUPLICATE_SUBMISSION");
        th_resp_free(&r);
    }
    return th_metric(s, "ticketd_refusal_db_lookups_total") - before;
}

static void test_trusted_filter_saves_the_lookups(void **state)
{
    int64_t session;
    (void)state;
    const char *env[] = {FAST_BUILD, NULL};
    struct th_server *s = th_serve(0, env);
    th_wait_metric(s, "ticketd_bloom_builds_total", 1, WAIT_MS);
    place(s, 5101, "first", &session);
    long long lookups = refusal_storm(s, 5101, session);
    long long saved = th_metric(s, "ticketd_bloom_checks_total{answer=\"saved\"}");
    print_message("filter on: %lld look-ups for %d refusals\n", lookups, N);
    /* A false positive costs a look-up; at 1% two in forty would be rare. */
    assert_true(lookups <= 2);
    assert_int_equal(saved + lookups, N);
}

/* -bloom (demo): every refusal asks the database, as before the filter. */
static void test_without_the_filter_every_refusal_asks(void **state)
{
    int64_t session;
    (void)state;
    const char *env[] = {"TICKETD_ENV=demo", "TICKETD_DEFENSES=-bloom", NULL};
    struct th_server *s = th_serve(1, env);
    place(s, 5102, "first", &session);
    long long lookups = refusal_storm(s, 5102, session);
    print_message("filter off: %lld look-ups for %d refusals\n", lookups, N);
    assert_int_equal(lookups, N);
}

/* A false positive (here: every bit set) costs one query, never a wrong
 * answer: the refusal stands. */
static void test_false_positive_costs_a_query(void **state)
{
    int64_t session;
    (void)state;
    const char *env[] = {FAST_BUILD, NULL};
    struct th_server *s = th_serve(2, env);
    th_wait_metric(s, "ticketd_bloom_builds_total", 1, WAIT_MS);
    place(s, 5103, "first", &session);
    /* Every one of the filter's m bits (its state begins "m:"). */
    char *st = th_redis_text("GET %s", STATE);
    assert_non_null(st);
    long long bytes = atoll(st) / 8 + 1;
    free(st);
    assert_true(bytes > 1);
    assert_int_equal(th_redis_int("EVAL %s 1 ticketd:bloom:{orders} %lld",
                                  "redis.call('SETRANGE', KEYS[1], 0, string.rep('\\255', "
                                  "tonumber(ARGV[1]))) return 1",
                                  bytes),
                     1);
    long long lookups = refusal_storm(s, 5103, session);
    assert_int_equal(lookups, N);
    assert_true(th_metric(s, "ticketd_bloom_checks_total{answer=\"maybe\"}") >= N);
}

/* Redis flushed: the filter is empty and has no state. Its "no" is not
 * believed, and the order that exists is found. */
static void test_flushed_filter_order_exists(void **state)
{
    int64_t session;
    (void)state;
    const char *env[] = {NO_REBUILD, NULL};
    struct th_server *s = th_serve(3, env);
    th_wait_metric(s, "ticketd_bloom_builds_total", 1, WAIT_MS);
    place(s, 5104, "kept", &session);
    /* Another process for the retry (the first remembers its answer
     * in-process), started before the flush so that no build follows it. */
    s = th_serve(8, env);
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    hold_session(5104, session);
    struct th_resp r = retry(s, 5104, "kept", session);
    assert_int_equal(r.status, 201);
    th_expect_layer(&r, "unique-index");
    th_resp_free(&r);
    assert_true(th_metric(s, "ticketd_bloom_checks_total{answer=\"untrusted\"}") >= 1);
}

/* The naive variant believes the flushed filter: the retry whose order
 * exists is refused. The wrong refusals are counted. */
static void test_demo_believed_flushed_filter_refuses_wrongly(void **state)
{
    int64_t sessions[5];
    char key[32];
    int wrong = 0;
    (void)state;
    const char *env[] = {NO_REBUILD, "TICKETD_ENV=demo", "TICKETD_DEFENSES=-bloom-liveness", NULL};
    struct th_server *s = th_serve(4, env);
    th_wait_metric(s, "ticketd_bloom_builds_total", 1, WAIT_MS);
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "kept-%d", i);
        place(s, 5105, key, &sessions[i]);
    }
    s = th_serve(9, env); /* the first process remembers its answers in-process */
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "kept-%d", i);
        hold_session(5105, sessions[i]);
        struct th_resp r = retry(s, 5105, key, sessions[i]);
        wrong += r.status == 409; /* its order exists: 201 is the truth */
        th_resp_free(&r);
    }
    print_message("believed flushed filter: %d of 5 retries wrongly refused\n", wrong);
    assert_int_equal(wrong, 5);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders WHERE user_id = 5105"), 5);
}

/* An order older than the filter (written before any filter existed) is
 * in it once the filter is built from the orders table. */
static void test_orders_older_than_the_filter(void **state)
{
    int64_t session;
    (void)state;
    const char *bare[] = {"TICKETD_ENV=demo", "TICKETD_DEFENSES=-bloom", NULL};
    struct th_server *old = th_serve(5, bare);
    place(old, 5106, "older", &session);
    th_stop_clean(old);
    assert_int_equal(th_redis_int("FLUSHALL"), 0);

    const char *env[] = {FAST_BUILD, NULL};
    struct th_server *s = th_serve(6, env);
    th_wait_metric(s, "ticketd_bloom_builds_total", 1, WAIT_MS);
    hold_session(5106, session);
    struct th_resp r = retry(s, 5106, "older", session);
    assert_int_equal(r.status, 201);
    th_resp_free(&r);
    assert_true(th_metric(s, "ticketd_bloom_checks_total{answer=\"maybe\"}") >= 1);
}

/* Redis lost records without losing the filter's state (a failover to a
 * replica that had not seen them): the instance's liveness key is gone
 * within its TTL, and the filter stops being trusted. */
static void test_lost_liveness_key_untrusts_the_filter(void **state)
{
    (void)state;
    const char *env[] = {NO_REBUILD, "TICKETD_INSTANCE_TTL_MS=600", NULL};
    struct th_server *s = th_serve(7, env);
    th_wait_metric(s, "ticketd_bloom_builds_total", 1, WAIT_MS);
    assert_int_equal(th_redis_int("EXISTS %s", STATE), 1);
    /* Every instance key: this test's server is the only one running. */
    long long gone =
        th_redis_int("EVAL %s 0", "local n = 0 for _, k in ipairs(redis.call('KEYS', "
                                  "'ticketd:instance:*')) do n = n + redis.call('DEL', k) end "
                                  "return n");
    assert_int_equal(gone, 1);
    th_wait_metric(s, "ticketd_redis_lost_records_total", 1, WAIT_MS);
    assert_int_equal(th_redis_int("EXISTS %s", STATE), 0);
}

/* One instance cannot reach Redis (its Redis port is closed) and, under
 * policy degrade, still completes an order: the filter the other instance
 * trusts was never told of it. The order leaves its row in
 * order_key_filter_misses, the instance dies (nothing in its memory
 * helps), and the other instance's next round untrusts and rebuilds the
 * filter; its refusal of that key then asks the database and finds the
 * order. */
static void test_instance_without_redis_untrusts_the_filter(void **state)
{
    int64_t session;
    char tok[96];
    (void)state;
    const char *env[] = {FAST_BUILD, NULL};
    struct th_server *b = th_serve(8, env);
    th_wait_metric(b, "ticketd_bloom_builds_total", 1, WAIT_MS);
    session = th_session(b, 100, 1500);
    th_order_token(b, 5109, tok);

    const char *cut[] = {FAST_BUILD, "TICKETD_REDIS_POLICY=degrade", "TICKETD_REDIS_PORT=1", NULL};
    struct th_server *a = th_serve(9, cut);
    struct th_resp r = th_order(a, 5109, "cut-off", tok, session, 1);
    assert_int_equal(r.status, 201);
    th_resp_free(&r);
    /* The order left its row. B's job may already have found it and
     * deleted it: its rounds go on while A answers, and each counts the
     * rows it saw before it deletes them (bloom_job.c). So the row is
     * read first, and B's count only when the row is gone. */
    long long rows = th_db_int("SELECT COUNT(*) FROM order_key_filter_misses");
    assert_true(rows == 1 ||
                (rows == 0 && th_metric(b, "ticketd_bloom_misses_untrusted_total") >= 1));
    th_kill(a);

    th_wait_metric(b, "ticketd_bloom_misses_untrusted_total", 1, WAIT_MS);
    th_wait_metric(b, "ticketd_bloom_builds_total", 2, WAIT_MS);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_key_filter_misses"), 0);
    long long lookups = th_metric(b, "ticketd_refusal_db_lookups_total");
    hold_session(5109, session);
    struct th_resp again = retry(b, 5109, "cut-off", session);
    assert_int_equal(again.status, 201); /* the order A placed, not a refusal */
    th_expect_layer(&again, "unique-index");
    th_resp_free(&again);
    assert_int_equal(th_metric(b, "ticketd_refusal_db_lookups_total") - lookups, 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders WHERE user_id = 5109"), 1);

    /* A key with no order is still refused, the rebuilt filter trusted. */
    struct th_resp none = retry(b, 5109, "never-ordered", session);
    th_expect_problem(&none, 409, "DUPLICATE_SUBMISSION");
    th_resp_free(&none);
}

/* More orders than one command's arguments could carry, k positions
 * each, are older than the filter: the build sets all their bits (it
 * gave up on the first page of more than four keys, "order-key filter
 * build abandoned", and the filter was never trusted). Each order is then
 * found behind a refusal, and a key with no order is spared its look-up. */
static void test_filter_built_from_many_orders(void **state)
{
    int64_t sessions[12];
    char key[32];
    (void)state;
    const char *bare[] = {"TICKETD_ENV=demo", "TICKETD_DEFENSES=-bloom", NULL};
    struct th_server *old = th_serve(5, bare);
    for (int i = 0; i < 12; i++) {
        snprintf(key, sizeof key, "many-%d", i);
        place(old, 5110, key, &sessions[i]);
    }
    th_stop_clean(old);
    assert_int_equal(th_redis_int("FLUSHALL"), 0);

    const char *env[] = {NO_REBUILD, NULL};
    struct th_server *s = th_serve(6, env);
    th_wait_metric(s, "ticketd_bloom_builds_total", 1, WAIT_MS);
    for (int i = 0; i < 12; i++) {
        snprintf(key, sizeof key, "many-%d", i);
        hold_session(5110, sessions[i]);
        struct th_resp r = retry(s, 5110, key, sessions[i]);
        assert_int_equal(r.status, 201);
        th_expect_layer(&r, "unique-index");
        th_resp_free(&r);
    }
    struct th_resp none = retry(s, 5110, "never-ordered", sessions[0]);
    th_expect_problem(&none, 409, "DUPLICATE_SUBMISSION");
    th_resp_free(&none);
    assert_int_equal(th_metric(s, "ticketd_bloom_checks_total{answer=\"saved\"}"), 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders WHERE user_id = 5110"), 12);
}

/* The calls of one Redis command since CONFIG RESETSTAT, from INFO
 * commandstats (0 when it did not run). */
static long long calls_of(const char *info, const char *cmd)
{
    char needle[64];
    snprintf(needle, sizeof needle, "cmdstat_%s:calls=", cmd);
    const char *at = strstr(info, needle);
    return at != NULL ? atoll(at + strlen(needle)) : 0;
}

/* What a new order costs Redis, every defence on and the token required:
 * two round trips from its loop (the key's script before the database,
 * its completion after), and in them two scripts whose inner commands
 * Redis counts as its own: the filter's bits are one BITFIELD in the
 * first; the completion reads nothing first, its SET ... GET and GETDEL
 * answer what they replaced (no MGET). (It was three round trips, three
 * scripts and seven SETBITs, then an MGET more.) Counted by Redis and by
 * ticketd's own counter of the commands its loops sent, each waited for. */
static void test_an_order_costs_two_round_trips(void **state)
{
    char tok[96];
    (void)state;
    /* A Redis reply slower than the default 300 ms (a busy machine) would
     * send the order on without the key's script, and its filter bits in a
     * command of their own: a third round trip that says nothing of the
     * path counted here. */
    const char *env[] = {NO_REBUILD, "TICKETD_ORDER_TOKEN_REQUIRED=1",
                         "TICKETD_REDIS_TIMEOUT_MS=20000", NULL};
    struct th_server *s = th_serve(7, env);
    th_wait_metric(s, "ticketd_bloom_builds_total", 1, WAIT_MS);
    int64_t session = th_session(s, 100, 1500);
    /* The scripts are loaded by their first use (EVALSHA, NOSCRIPT, then
     * EVAL: one round trip more), and a Redis restarted or flushed by an
     * earlier test has none: one order first, so that the one counted
     * meets them cached, as every order but a server's first does. */
    th_order_token(s, 5110, tok);
    struct th_resp warm = th_order(s, 5110, "warm", tok, session, 1);
    assert_int_equal(warm.status, 201);
    th_resp_free(&warm);
    /* Counted on an order that met both scripts cached (no EVAL in its
     * window): a script may still be missing after the warm-up (a Redis
     * flushed meanwhile); then the next order counts, at most three. */
    long long trips = 0, evalsha = 0, bitfield = 0, setbit = 0, mget = 0, getdel = 0, eval = 1;
    for (int attempt = 0; attempt < 3 && eval != 0; attempt++) {
        char key[32];
        snprintf(key, sizeof key, "costed-%d", attempt);
        th_order_token(s, 5111 + attempt, tok);
        assert_int_equal(th_redis_int("CONFIG RESETSTAT"), 0);
        long long sent = th_metric(s, "ticketd_redis_pipelined_commands_total");
        struct th_resp r = th_order(s, 5111 + attempt, key, tok, session, 1);
        assert_int_equal(r.status, 201);
        th_resp_free(&r);
        trips = th_metric(s, "ticketd_redis_pipelined_commands_total") - sent;
        char *info = th_redis_text("INFO commandstats");
        assert_non_null(info);
        evalsha = calls_of(info, "evalsha");
        eval = calls_of(info, "eval");
        bitfield = calls_of(info, "bitfield");
        setbit = calls_of(info, "setbit");
        mget = calls_of(info, "mget");
        getdel = calls_of(info, "getdel");
        free(info);
        print_message("one order: %lld round trips, evalsha %lld, eval %lld, bitfield %lld, "
                      "setbit %lld, mget %lld, getdel %lld\n",
                      trips, evalsha, eval, bitfield, setbit, mget, getdel);
    }
    assert_int_equal(eval, 0);
    /* The round trips are the order's two scripts, each waited for, by
     * Redis's counts and by the loops' own counter alike. (That counter
     * once counted a new link's first command, written when the connect
     * completed, with the link's second: one more than the order sent,
     * whenever its loop's link had just carried that first command,
     * about one run in four here.) */
    assert_int_equal(trips, 2);
    assert_int_equal(evalsha, 2);
    assert_int_equal(bitfield, 1);
    assert_int_equal(setbit, 0);
    assert_int_equal(mget, 0);
    assert_int_equal(getdel, 1);
}

/* ---- a turn's begins in one call ---- */

#define FOLD_CLIENTS 16
#define FOLD_ROUNDS  20

struct fold_round {
    const struct th_server *s;
    int64_t session;
    int round;
    char tok[FOLD_CLIENTS][96];
    long status[FOLD_CLIENTS];
    char code[FOLD_CLIENTS][48];
};

/* Client i's user: its own, but the last two clients share one (their
 * keys differ, so the session lock decides between them). */
static int64_t fold_user(int round, int i)
{
    return 6000 + round * 100 + (i == FOLD_CLIENTS - 1 ? i - 1 : i);
}

static void fold_key(int round, int i, char out[32])
{
    snprintf(out, 32, "fold-%d-%d", round, i);
}

static void fold_order(int i, void *ctx)
{
    struct fold_round *f = ctx;
    char key[32];
    fold_key(f->round, i, key);
    struct th_resp r = th_order(f->s, fold_user(f->round, i), key, f->tok[i], f->session, 1);
    f->status[i] = r.status;
    snprintf(f->code[i], sizeof f->code[i], "%s", r.status == 201 ? "" : th_code(&r));
    th_resp_free(&r);
}

static int64_t fold_rows(int round, int i, int64_t session)
{
    char key[32];
    fold_key(round, i, key);
    return th_db_int("SELECT COUNT(*) FROM orders WHERE user_id = %lld AND session_id = %lld AND "
                     "request_id = '%s'",
                     (long long)fold_user(round, i), (long long)session, key);
}

/* Sixteen clients order at once on one loop, the token required: the
 * begins one turn gathered go to Redis as one call of the key's script's
 * fold, and the ends as one of the completion's, yet each request gets its
 * own answer. Client 0 presents a token issued to someone else, and the
 * last two share a user (one session lock between them): their refusals
 * stay their own, and every answer matches the books. The rounds go on
 * until a fold happened (a turn that gathered two begins or two ends; with
 * sixteen clients on one loop nearly the first round), at most
 * FOLD_ROUNDS. Then fewer scripts ran than requests asked for, and every
 * key that bought an order is in the filter: the fold set its bits with
 * one BITFIELD for all (a key left out would be refused below for a lock
 * while its order exists, the filter's "certainly not" believed). */
static void test_a_turns_calls_go_as_one(void **state)
{
    (void)state;
    const char *env[] = {NO_REBUILD, "TICKETD_ORDER_TOKEN_REQUIRED=1", "TICKETD_LOOPS=1",
                         "TICKETD_REDIS_TIMEOUT_MS=20000", NULL};
    struct th_server *s = th_serve(9, env);
    th_wait_metric(s, "ticketd_bloom_builds_total", 1, WAIT_MS);
    int64_t session = th_session(s, 10000, 1500);
    static struct fold_round f;
    long long created = 0, rounds = 0;
    assert_int_equal(th_redis_int("CONFIG RESETSTAT"), 0);
    long long folds0 = th_metric(s, "ticketd_redis_folds_total");
    for (int round = 0; round < FOLD_ROUNDS; round++) {
        f = (struct fold_round){.s = s, .session = session, .round = round};
        for (int i = 0; i < FOLD_CLIENTS; i++)
            th_order_token(s, i == 0 ? 9999 : fold_user(round, i), f.tok[i]);
        th_parallel(FOLD_CLIENTS, fold_order, &f);
        rounds++;
        int shared_201 = 0;
        for (int i = 0; i < FOLD_CLIENTS; i++) {
            int64_t rows = fold_rows(round, i, session);
            if (f.status[i] == 201) {
                assert_int_equal(rows, 1);
                created++;
            } else {
                assert_int_equal(rows, 0);
            }
            if (i == 0) {
                assert_int_equal(f.status[i], 409);
                assert_string_equal(f.code[i], "ORDER_TOKEN_INVALID");
            } else if (i < FOLD_CLIENTS - 2) {
                if (f.status[i] != 201)
                    fail_msg("round %d client %d: %ld %s", round, i, f.status[i], f.code[i]);
            } else if (f.status[i] == 201) {
                shared_201++;
            } else {
                assert_int_equal(f.status[i], 409);
                assert_string_equal(f.code[i], "DUPLICATE_SUBMISSION");
            }
        }
        assert_true(shared_201 >= 1);
        if (th_metric(s, "ticketd_redis_folds_total") > folds0)
            break;
    }
    long long folds = th_metric(s, "ticketd_redis_folds_total") - folds0;
    print_message("%lld rounds, %lld orders, %lld folds of %lld calls\n", rounds, created, folds,
                  th_metric(s, "ticketd_redis_folded_calls_total"));
    assert_true(folds >= 1);
    assert_true(th_metric(s, "ticketd_redis_folded_calls_total") >= 2 * folds);
    char *info = th_redis_text("INFO commandstats");
    assert_non_null(info);
    long long evalsha = calls_of(info, "evalsha") + calls_of(info, "eval");
    long long bitfield = calls_of(info, "bitfield");
    free(info);
    print_message("scripts run %lld, BITFIELD %lld\n", evalsha, bitfield);
    /* Alone, every request would run its begin and every order its end. */
    assert_true(evalsha < rounds * FOLD_CLIENTS + created);
    assert_true(bitfield < created);
    /* The filter heard of every key that bought an order: with Redis's
     * records of those keys gone and their sessions held, a retry is
     * refused for the lock only after the database was asked, and finds
     * its order. Another process, so that no answer is remembered. */
    s = th_serve(10, env);
    long long saved = th_metric(s, "ticketd_bloom_checks_total{answer=\"saved\"}");
    for (int round = 0; round < rounds; round++) {
        for (int i = 1; i < FOLD_CLIENTS; i++) {
            char key[32];
            fold_key(round, i, key);
            if (fold_rows(round, i, session) == 0)
                continue;
            int64_t user = fold_user(round, i);
            th_redis_int("DEL idem:{%lld}:%s", (long long)user, key);
            hold_session(user, session);
            struct th_resp r = retry(s, user, key, session);
            if (r.status != 201)
                fail_msg("round %d client %d: a retry of an order that exists: %ld %s", round, i,
                         r.status, r.body);
            th_expect_layer(&r, "unique-index");
            th_resp_free(&r);
            th_redis_int("DEL lock:order:{%lld}:%lld", (long long)user, (long long)session);
        }
    }
    print_message("the retries' filter checks: saved %lld, maybe %lld, untrusted %lld\n",
                  th_metric(s, "ticketd_bloom_checks_total{answer=\"saved\"}") - saved,
                  th_metric(s, "ticketd_bloom_checks_total{answer=\"maybe\"}"),
                  th_metric(s, "ticketd_bloom_checks_total{answer=\"untrusted\"}"));
    assert_int_equal(th_metric(s, "ticketd_bloom_checks_total{answer=\"saved\"}"), saved);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, th_teardown_stop)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_trusted_filter_saves_the_lookups),
        T(test_without_the_filter_every_refusal_asks),
        T(test_false_positive_costs_a_query),
        T(test_flushed_filter_order_exists),
        T(test_demo_believed_flushed_filter_refuses_wrongly),
        T(test_orders_older_than_the_filter),
        T(test_lost_liveness_key_untrusts_the_filter),
        T(test_instance_without_redis_untrusts_the_filter),
        T(test_filter_built_from_many_orders),
        T(test_an_order_costs_two_round_trips),
        T(test_a_turns_calls_go_as_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
