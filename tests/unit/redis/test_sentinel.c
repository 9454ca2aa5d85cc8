/* test_sentinel.c - the pure parts of following a Redis failover: the
 * Sentinel list, the master name, which Sentinel is asked next, and the
 * reading of get-master-addr-by-name's answer. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "sentinel.h"

#include <stdio.h>
#include <string.h>

static void test_parse_accepts(void **state)
{
    (void)state;
    struct sentinel_list l;
    char err[160] = "";
    assert_true(sentinel_parse("127.0.0.1:26379", &l, err, sizeof err));
    assert_int_equal(l.n, 1);
    assert_string_equal(l.a[0].host, "127.0.0.1");
    assert_int_equal(l.a[0].port, 26379);

    assert_true(sentinel_parse(" s1.example:1 ,s-2:65535,[::1]:26381 ", &l, err, sizeof err));
    assert_int_equal(l.n, 3);
    assert_string_equal(l.a[0].host, "s1.example");
    assert_int_equal(l.a[0].port, 1);
    assert_string_equal(l.a[1].host, "s-2");
    assert_int_equal(l.a[1].port, 65535);
    assert_string_equal(l.a[2].host, "::1");
    assert_int_equal(l.a[2].port, 26381);

    /* The same host on other ports is three Sentinels (one machine, as in
     * make test-cluster). */
    assert_true(sentinel_parse("h:1,h:2,h:3", &l, err, sizeof err));
    assert_int_equal(l.n, 3);
}

static void test_parse_refuses(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *why;
    } cases[] = {
        {"", "empty item"},       {" ", "empty item"},        {"a:1,", "empty item"},
        {",a:1", "empty item"},   {"a:1,,b:2", "empty item"}, {"a", "host:port"},
        {"a:", "1-65535"},        {":1", "not a host"},       {"a:0", "1-65535"},
        {"a:65536", "1-65535"},   {"a:123456", "1-65535"},    {"a:-1", "1-65535"},
        {"a:1x", "1-65535"},      {"a b:1", "not a host"},    {"a/b:1", "not a host"},
        {"[::1]", "[ipv6]:port"}, {"[::1:1", "[ipv6]:port"},  {"[]:1", "not a host"},
        {"a:1,a:1", "twice"},     {"a:1, a:1", "twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sentinel_list l;
        char err[160] = "";
        if (sentinel_parse(cases[i].text, &l, err, sizeof err))
            fail_msg("case %zu '%s' accepted", i, cases[i].text);
        if (strstr(err, cases[i].why) == NULL)
            fail_msg("case %zu '%s': reason '%s', want '%s'", i, cases[i].text, err, cases[i].why);
    }
}

static void test_parse_bounds(void **state)
{
    (void)state;
    char text[SENTINEL_MAX * 16 + 32] = "";
    size_t len = 0;
    for (int i = 0; i < SENTINEL_MAX; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%sh:%d", i ? "," : "", i + 1);
    struct sentinel_list l;
    char err[160] = "";
    assert_true(sentinel_parse(text, &l, err, sizeof err));
    assert_int_equal(l.n, SENTINEL_MAX);
    snprintf(text + len, sizeof text - len, ",h:999");
    assert_false(sentinel_parse(text, &l, err, sizeof err));
    assert_non_null(strstr(err, "more than"));

    /* A host name longer than the buffer is refused, not cut. */
    char longhost[SENTINEL_HOST_MAX + 16];
    memset(longhost, 'a', SENTINEL_HOST_MAX);
    snprintf(longhost + SENTINEL_HOST_MAX, 16, ":1");
    assert_false(sentinel_parse(longhost, &l, err, sizeof err));
}

static void test_valid_name(void **state)
{
    (void)state;
    assert_true(sentinel_valid_name("mymaster"));
    assert_true(sentinel_valid_name("ticketd-primary_1.eu"));
    assert_false(sentinel_valid_name(""));
    assert_false(sentinel_valid_name("my master"));
    assert_false(sentinel_valid_name("a\nb"));
    assert_false(sentinel_valid_name("a*"));
    char long_name[80];
    memset(long_name, 'm', 65);
    long_name[65] = '\0';
    assert_false(sentinel_valid_name(long_name));
    long_name[64] = '\0';
    assert_true(sentinel_valid_name(long_name));
}

/* The one that answered last first, then the others in order, each once. */
static void test_pick_order(void **state)
{
    (void)state;
    static const struct {
        int preferred, n;
        int want[5]; /* then -1 */
    } cases[] = {
        {0, 3, {0, 1, 2, -1}}, {1, 3, {1, 2, 0, -1}},  {2, 3, {2, 0, 1, -1}},
        {0, 1, {0, -1}},       {-1, 3, {0, 1, 2, -1}}, /* nobody answered yet */
        {7, 3, {0, 1, 2, -1}},                         /* stale index: start over */
        {0, 0, {-1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int a = 0;; a++) {
            int got = sentinel_pick(cases[i].preferred, a, cases[i].n);
            if (got != cases[i].want[a])
                fail_msg("case %zu attempt %d: %d, want %d", i, a, got, cases[i].want[a]);
            if (got == -1)
                break;
        }
    }
    assert_int_equal(sentinel_pick(0, -1, 3), -1);
}

static void test_read_master(void **state)
{
    (void)state;
    struct sentinel_addr a;
    assert_true(sentinel_read_master("127.0.0.1", "36380", &a));
    assert_string_equal(a.host, "127.0.0.1");
    assert_int_equal(a.port, 36380);
    assert_true(sentinel_read_master("::1", "6379", &a));
    assert_false(sentinel_read_master(NULL, "6379", &a));
    assert_false(sentinel_read_master("127.0.0.1", NULL, &a));
    assert_false(sentinel_read_master("", "6379", &a));
    assert_false(sentinel_read_master("127.0.0.1", "0", &a));
    assert_false(sentinel_read_master("127.0.0.1", "x", &a));
    assert_false(sentinel_read_master("bad host", "1", &a));
}

/* A Sentinel list needs a master name and the reverse; a bad list or name
 * stops start-up naming the setting. A single address needs neither. */
static void test_settings_valid(void **state)
{
    (void)state;
    static const struct {
        const char *sentinels;
        const char *master;
        bool want;
        const char *why;
    } cases[] = {
        {"", "", true, ""},
        {"127.0.0.1:26379", "mymaster", true, ""},
        {"a:1, b:2 ,c:3", "ticketd-primary_1", true, ""},
        {"127.0.0.1:26379", "", false, "TICKETD_REDIS_MASTER is not"},
        {"", "mymaster", false, "without TICKETD_REDIS_SENTINELS"},
        {"127.0.0.1", "m", false, "TICKETD_REDIS_SENTINELS=127.0.0.1: "},
        {"127.0.0.1:0", "m", false, "1-65535"},
        {"a:1,,b:2", "m", false, "empty item"},
        {"a:1,a:1", "m", false, "twice"},
        {"a:1", "my master", false, "TICKETD_REDIS_MASTER=my master"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512] = "";
        bool got = sentinel_settings_valid(cases[i].sentinels, cases[i].master, err, sizeof err);
        if (got != cases[i].want || strstr(err, cases[i].why) == NULL)
            fail_msg("case %zu (%s / %s): got %d (%s), want %d with \"%s\"", i, cases[i].sentinels,
                     cases[i].master, got, err, cases[i].want, cases[i].why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_accepts),  cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_parse_bounds),   cmocka_unit_test(test_valid_name),
        cmocka_unit_test(test_pick_order),     cmocka_unit_test(test_read_master),
        cmocka_unit_test(test_settings_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
