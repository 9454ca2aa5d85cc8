/* test_redis_addr.c - where the Redis primary is, as the connections read
 * it: a numeric host published at start with no resolver, a host name
 * published as the numeric address it stands for (looked up off the
 * caller's thread after start), and the generation a connection compares
 * its own with. No Redis and no Sentinel: the Sentinel path runs in
 * tests/integration/itest_redis_outage.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "err.h"
#include "redis_conn.h"
#include "sentinel.h"

#include <string.h>

static struct config with_host(char *host)
{
    struct config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.redis_host = host;
    cfg.redis_port = 6390;
    cfg.redis_sentinels = (char *)"";
    cfg.redis_master = (char *)"";
    cfg.redis_timeout_ms = 300;
    return cfg;
}

static void test_a_numeric_host_is_published_as_it_is(void **state)
{
    (void)state;
    char host[SENTINEL_HOST_MAX];
    int port = 0;
    unsigned gen = 0;
    struct config cfg = with_host((char *)"127.0.0.1");
    assert_int_equal(redis_addr_init(&cfg), TD_OK);
    assert_false(redis_sentinel_on());
    assert_int_equal(redis_primary(host, sizeof host, &port, &gen), TD_OK);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 6390);
    /* A failed connection changes nothing here: there is nothing to look
     * up again, and the connection dials the same address. */
    redis_forget_primary(gen);
    assert_false(redis_primary_moved(gen));
    assert_true(redis_primary_moved(gen + 1));
    redis_addr_cleanup();
}

static void test_a_socket_path_is_published_as_it_is(void **state)
{
    (void)state;
    char host[SENTINEL_HOST_MAX];
    int port = 0;
    unsigned gen = 0;
    struct config cfg = with_host((char *)"/run/redis/redis.sock");
    assert_int_equal(redis_addr_init(&cfg), TD_OK);
    assert_int_equal(redis_primary(host, sizeof host, &port, &gen), TD_OK);
    assert_string_equal(host, "/run/redis/redis.sock");
    redis_addr_cleanup();
}

/* A name is looked up once at start and published numeric, so that no
 * connect (a loop's included) ever looks it up; asking again keeps the
 * generation while the answer is the same. */
static void test_a_host_name_is_published_numeric(void **state)
{
    (void)state;
    char host[SENTINEL_HOST_MAX];
    int port = 0;
    unsigned gen = 0, again = 0;
    struct config cfg = with_host((char *)"localhost");
    assert_int_equal(redis_addr_init(&cfg), TD_OK);
    assert_int_equal(redis_primary(host, sizeof host, &port, &gen), TD_OK);
    assert_true(strcmp(host, "127.0.0.1") == 0 || strcmp(host, "::1") == 0);
    assert_int_equal(port, 6390);
    redis_forget_primary(gen); /* the resolver looks again, off this thread */
    assert_int_equal(redis_primary(host, sizeof host, &port, &again), TD_OK);
    assert_int_equal(again, gen);
    assert_false(redis_primary_moved(gen));
    redis_addr_cleanup(); /* joins the resolver */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_numeric_host_is_published_as_it_is),
        cmocka_unit_test(test_a_socket_path_is_published_as_it_is),
        cmocka_unit_test(test_a_host_name_is_published_numeric),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
