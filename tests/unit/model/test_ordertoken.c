/* test_ordertoken.c - signed order tokens: a genuine one checks out for
 * its user until it expires; anything altered, another user's or made up
 * does not. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ordertoken.h"

#include <stdio.h>
#include <string.h>

#define SECRET "unit-test-secret-0123456789abcdef0123456789"
#define NOW    1800000000LL

static void test_genuine_until_it_expires(void **state)
{
    (void)state;
    char t[ORDERTOKEN_MAX + 1], u[ORDERTOKEN_MAX + 1];
    ordertoken_new(SECRET, 42, NOW + 600, t);
    ordertoken_new(SECRET, 42, NOW + 600, u);
    assert_true(strlen(t) <= ORDERTOKEN_MAX);
    assert_string_not_equal(t, u); /* random */
    assert_int_equal(ordertoken_check(SECRET, 42, NOW, t), ORDERTOKEN_GENUINE);
    assert_int_equal(ordertoken_check(SECRET, 42, NOW + 599, t), ORDERTOKEN_GENUINE);
    assert_int_equal(ordertoken_check(SECRET, 42, NOW + 600, t), ORDERTOKEN_EXPIRED);
}

static void test_not_genuine(void **state)
{
    (void)state;
    char t[ORDERTOKEN_MAX + 1], bad[ORDERTOKEN_MAX + 8];
    ordertoken_new(SECRET, 42, NOW + 600, t);
    /* Another user, another secret. */
    assert_int_equal(ordertoken_check(SECRET, 43, NOW, t), ORDERTOKEN_FORGED);
    assert_int_equal(ordertoken_check(SECRET "x", 42, NOW, t), ORDERTOKEN_FORGED);
    /* Any one character changed, in the random part, the expiry or the MAC. */
    for (size_t i = 0; i < strlen(t); i++) {
        if (t[i] == '.')
            continue;
        snprintf(bad, sizeof bad, "%s", t);
        bad[i] = bad[i] == 'A' ? 'B' : 'A';
        if (ordertoken_check(SECRET, 42, NOW, bad) != ORDERTOKEN_FORGED)
            fail_msg("changing character %zu of %s went unnoticed", i, t);
    }
    /* A later expiry written over the signed one. */
    const char *dot = strchr(t, '.');
    snprintf(bad, sizeof bad, "%.*s.%lld%s", (int)(dot - t), t, NOW + 99999, strchr(dot + 1, '.'));
    assert_int_equal(ordertoken_check(SECRET, 42, NOW, bad), ORDERTOKEN_FORGED);
    static const char *const junk[] = {
        "",
        ".",
        "..",
        "abc",
        "a.b.c",
        "tok-from-before-signing-0123456789abcdef0123",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.-1.AAAAAAAAAAAAAAAAAAAAAA",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.99999999999999999999999.AAAAAAAAAAAAAAAAAAAAAA",
    };
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++)
        assert_int_equal(ordertoken_check(SECRET, 42, NOW, junk[i]), ORDERTOKEN_FORGED);
    assert_int_equal(ordertoken_check(SECRET, 42, NOW, NULL), ORDERTOKEN_FORGED);
}

/* The key a spent token is recorded under: SHA-256 in lowercase hex (the
 * FIPS 180-2 vector), never the token's own text. */
static void test_key_is_the_hash(void **state)
{
    (void)state;
    char key[ORDERTOKEN_KEY_LEN + 1], other[ORDERTOKEN_KEY_LEN + 1];
    ordertoken_key("abc", key);
    assert_string_equal(key, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    char tok[ORDERTOKEN_MAX + 1];
    ordertoken_new(SECRET, 42, 2000000000, tok);
    ordertoken_key(tok, key);
    assert_int_equal(strlen(key), ORDERTOKEN_KEY_LEN);
    assert_null(strstr(key, tok));
    tok[0] = tok[0] == 'A' ? 'B' : 'A';
    ordertoken_key(tok, other);
    assert_string_not_equal(key, other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_genuine_until_it_expires),
        cmocka_unit_test(test_not_genuine),
        cmocka_unit_test(test_key_is_the_hash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
