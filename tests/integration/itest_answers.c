/* itest_answers.c - every request that made an order gets its answer.
 *
 * The loop's promise, held from outside: 64 clients, each on its own
 * kept-alive connection, place 20 new orders one after the other, all at
 * once, with a 10 s client timeout, against one loop and against two. Each
 * client must get an answer to every order, and the database must hold
 * exactly the orders that were answered 201: an order without its answer
 * is the failure this test exists for (a committed order whose client was
 * told nothing). When a client is left without an answer, the server's
 * log lines for its X-Request-Id ("late answer: ..." from http_late.c) are
 * printed, so the failure says where the answer stopped. */
#include "harness.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#define CLIENTS  64
#define ROUNDS   20
#define SESSIONS 8
#define TAG      71 /* th_user_of's tag for this file's users */

struct storm {
    const struct th_server *s;
    int64_t sessions[SESSIONS];
    int loops;
    atomic_int created, refused, unanswered;
    pthread_mutex_t mu;
    char missing_id[48]; /* the first request left without an answer */
    char missing[256];
};

static void storm_client(int i, void *p)
{
    struct storm *st = p;
    struct th_client *cl = th_client_new();
    th_client_timeout(cl, 10);
    int64_t session = st->sessions[i % SESSIONS];
    for (int n = 0; n < ROUNDS; n++) {
        char key[48];
        snprintf(key, sizeof key, "answers-%d-%d-%d", st->loops, i, n);
        struct th_resp r = th_client_order(cl, st->s, th_user_of(TAG, i), key, NULL, session, 1);
        if (r.status == 201) {
            atomic_fetch_add(&st->created, 1);
        } else if (r.status == 0) {
            atomic_fetch_add(&st->unanswered, 1);
            pthread_mutex_lock(&st->mu);
            if (st->missing[0] == '\0') {
                snprintf(st->missing_id, sizeof st->missing_id, "%s", r.request_id);
                snprintf(st->missing, sizeof st->missing,
                         "client %d order %d (key %s, request %s): no answer after %.1f s: %s", i,
                         n, key, r.request_id, r.seconds, r.error);
            }
            pthread_mutex_unlock(&st->mu);
        } else {
            /* An honest refusal (503 when the fibers are all taken) is an
             * answer; it must have changed nothing, which the count of
             * orders below checks. */
            atomic_fetch_add(&st->refused, 1);
        }
        th_resp_free(&r);
    }
    th_client_free(cl);
}

static void storm(int loops)
{
    char loops_env[32];
    snprintf(loops_env, sizeof loops_env, "TICKETD_LOOPS=%d", loops);
    const char *env[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0", loops_env, NULL};
    struct th_server *s = th_serve(0, env);
    static struct storm st;
    memset(&st, 0, sizeof st);
    pthread_mutex_init(&st.mu, NULL);
    st.s = s;
    st.loops = loops;
    for (int i = 0; i < SESSIONS; i++)
        st.sessions[i] = th_session(s, CLIENTS * ROUNDS, 100);

    double t0 = th_now_s();
    th_parallel(CLIENTS, storm_client, &st);
    print_message("%d loop(s): %d orders created, %d refused, %d unanswered in %.1f s\n", loops,
                  atomic_load(&st.created), atomic_load(&st.refused), atomic_load(&st.unanswered),
                  th_now_s() - t0);

    if (atomic_load(&st.unanswered) > 0) {
        th_log_request(s, st.missing_id);
        fail_msg("%d of %d orders got no answer with %d loop(s); the first: %s",
                 atomic_load(&st.unanswered), CLIENTS * ROUNDS, loops, st.missing);
    }
    /* Every order in the database was answered 201, and every 201 is an
     * order in the database. */
    int64_t in_db =
        th_db_int("SELECT COUNT(*) FROM orders WHERE request_id LIKE 'answers-%d-%%'", loops);
    if (in_db != atomic_load(&st.created))
        fail_msg("%lld orders in the database, %d answered 201 (%d refused)", (long long)in_db,
                 atomic_load(&st.created), atomic_load(&st.refused));
    assert_int_equal(atomic_load(&st.created) + atomic_load(&st.refused), CLIENTS * ROUNDS);
    pthread_mutex_destroy(&st.mu);
}

static void test_every_order_answered_on_one_loop(void **state)
{
    (void)state;
    storm(1);
}

static void test_every_order_answered_on_two_loops(void **state)
{
    (void)state;
    storm(2);
}

#define T(f) cmocka_unit_test_setup_teardown(f, th_setup_fresh, th_teardown_stop)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_every_order_answered_on_one_loop),
        T(test_every_order_answered_on_two_loops),
    };
    return cmocka_run_group_tests_name("answers", tests, NULL, NULL);
}
