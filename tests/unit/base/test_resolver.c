/* test_resolver.c - a server's address kept numeric (resolver.h): what
 * needs no look-up, the IPv4 address preferred for a name that has both,
 * a fixed host published as find names it, and a look-up asked for by a
 * failed connection, run on the resolver's own thread, that moves the
 * generation on when the answer changes. Names come from /etc/hosts
 * ("localhost"); no name service is asked. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "err.h"
#include "resolver.h"
#include "loop.h"
#include "util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static void test_what_needs_no_look_up(void **state)
{
    (void)state;
    assert_true(resolver_is_fixed("127.0.0.1"));
    assert_true(resolver_is_fixed("::1"));
    assert_true(resolver_is_fixed("/run/mysqld/mysqld.sock"));
    assert_false(resolver_is_fixed("localhost"));
    assert_false(resolver_is_fixed("mariadb"));
    assert_false(resolver_is_fixed("127.0.0.1.example"));
    assert_false(resolver_is_fixed(""));
}

static void test_a_name_becomes_its_ipv4_address(void **state)
{
    (void)state;
    char out[RESOLVER_HOST_MAX];
    /* /etc/hosts may list ::1 for localhost too, and first. */
    assert_true(resolver_numeric("test", "localhost", out, sizeof out));
    assert_string_equal(out, "127.0.0.1");
    assert_true(resolver_numeric("test", "LOCALHOST", out, sizeof out));
    assert_string_equal(out, "127.0.0.1");
    assert_true(resolver_numeric("test", "::1", out, sizeof out));
    assert_string_equal(out, "::1");
    assert_true(resolver_numeric("test", "/tmp/s.sock", out, sizeof out));
    assert_string_equal(out, "/tmp/s.sock");
}

/* A find whose answer the test sets, counting its calls. */
struct answers {
    _Atomic(const char *) host; /* set by the test, read by the resolver's thread */
    int port;
    atomic_bool fail;
    atomic_int calls;
};

static bool find_set(void *arg, char *host, size_t cap, int *port)
{
    struct answers *a = arg;
    atomic_fetch_add(&a->calls, 1);
    if (atomic_load(&a->fail))
        return false;
    snprintf(host, cap, "%s", atomic_load(&a->host));
    *port = a->port;
    return true;
}

/* Waits, bounded, for find's calls to reach n: progress, not time. */
static void wait_calls(struct answers *a, int n)
{
    for (int i = 0; i < 5000 && atomic_load(&a->calls) < n; i++)
        sleep_ms(1);
    assert_true(atomic_load(&a->calls) >= n);
}

static void test_a_fixed_host_is_published_as_named(void **state)
{
    (void)state;
    struct answers a = {.host = "localhost", .port = 3306};
    struct resolver r = {.what = "test", .find = find_set, .arg = &a, .gap_ms = 1};
    assert_int_equal(resolver_start(&r, true), TD_OK);
    char host[RESOLVER_HOST_MAX];
    int port = 0;
    unsigned gen = 0;
    assert_int_equal(resolver_get(&r, host, sizeof host, &port, &gen), TD_OK);
    assert_string_equal(host, "localhost"); /* not looked up: the client's own name */
    assert_int_equal(port, 3306);
    resolver_forget(&r, gen); /* no thread: nothing to look up again */
    assert_int_equal(atomic_load(&a.calls), 1);
    resolver_stop(&r);
}

static void test_a_failed_connection_has_the_name_looked_up_again(void **state)
{
    (void)state;
    struct answers a = {.host = "localhost", .port = 6390};
    struct resolver r = {.what = "test", .find = find_set, .arg = &a, .gap_ms = 1};
    assert_int_equal(resolver_start(&r, false), TD_OK);
    char host[RESOLVER_HOST_MAX];
    int port = 0;
    unsigned gen = 0, now = 0;
    assert_int_equal(resolver_get(&r, host, sizeof host, &port, &gen), TD_OK);
    assert_string_equal(host, "127.0.0.1");
    /* The same answer again: the generation stays. */
    resolver_forget(&r, gen);
    wait_calls(&a, 2);
    assert_false(resolver_moved(&r, gen));
    /* The server moved: the next look-up publishes a new generation. */
    atomic_store(&a.host, "::1");
    resolver_forget(&r, gen);
    wait_calls(&a, 3);
    for (int i = 0; i < 5000 && !resolver_moved(&r, gen); i++)
        sleep_ms(1);
    assert_true(resolver_moved(&r, gen));
    assert_int_equal(resolver_get(&r, host, sizeof host, &port, &now), TD_OK);
    assert_string_equal(host, "::1");
    assert_int_equal(now, gen + 1);
    /* A connection still on the old address asks for nothing: it was
     * replaced already. */
    resolver_forget(&r, gen);
    sleep_ms(20);
    assert_int_equal(atomic_load(&a.calls), 3);
    resolver_stop(&r);
}

static void test_nothing_found_at_start_is_looked_up_again(void **state)
{
    (void)state;
    struct answers a = {.host = "localhost", .port = 3306, .fail = true};
    struct resolver r = {.what = "test", .find = find_set, .arg = &a, .gap_ms = 1};
    assert_int_equal(resolver_start(&r, false), TD_OK);
    char host[RESOLVER_HOST_MAX];
    int port = 0;
    unsigned gen = 0;
    /* The thread tries at once, and again each time a caller asks. */
    wait_calls(&a, 2);
    atomic_store(&a.fail, false);
    int rc = TD_EUNAVAIL;
    for (int i = 0; i < 5000 && rc != TD_OK; i++) {
        rc = resolver_get(&r, host, sizeof host, &port, &gen); /* asks while there is none */
        if (rc != TD_OK)
            sleep_ms(1);
    }
    assert_int_equal(rc, TD_OK);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(gen, 1);
    resolver_stop(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_what_needs_no_look_up),
        cmocka_unit_test(test_a_name_becomes_its_ipv4_address),
        cmocka_unit_test(test_a_fixed_host_is_published_as_named),
        cmocka_unit_test(test_a_failed_connection_has_the_name_looked_up_again),
        cmocka_unit_test(test_nothing_found_at_start_is_looked_up_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
