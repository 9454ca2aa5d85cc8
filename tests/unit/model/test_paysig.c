/* test_paysig.c - the payment callback's HMAC and timestamp window: a
 * known signature, every way a header can be wrong, the window's edges,
 * and the order of the checks (a forgery learns nothing about our clock). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "paysig.h"

#include <ctype.h>
#include <string.h>

#define SECRET "pay-secret-0123456789"
#define TS     "1800000000"
#define NOW    ((int64_t)1800000000)
#define TOL    ((int64_t)300)

static const char body[] = "{\"txn_id\":\"t1\",\"order_no\":\"26120100000000000001\","
                           "\"amount_cents\":2000,\"status\":\"SUCCESS\"}";

/* HMAC-SHA256(SECRET, TS "." body), computed outside ticketd with
 * `printf '%s' "$TS.$BODY" | openssl dgst -sha256 -hmac "$SECRET"`. */
static const char known[] = "ea832d987b59c5ee1af82bb11abb70ca033d37f37b884f85e0a5143a672b514d";

static enum paysig_result verify(const char *ts, const char *sig, int64_t now)
{
    return paysig_verify(SECRET, ts, sig, body, strlen(body), now, TOL);
}

static void test_known_signature(void **state)
{
    (void)state;
    char sig[PAYSIG_HEX_LEN + 1];
    paysig_sign(SECRET, TS, body, strlen(body), sig);
    assert_string_equal(sig, known);
    assert_int_equal(verify(TS, known, NOW), PAYSIG_OK);
}

static void test_bad_signatures(void **state)
{
    (void)state;
    char sig[PAYSIG_HEX_LEN + 2];

    assert_int_equal(verify(TS, NULL, NOW), PAYSIG_BAD);
    assert_int_equal(verify(NULL, known, NOW), PAYSIG_BAD);
    assert_int_equal(verify(TS, "", NOW), PAYSIG_BAD);

    /* One hex digit changed, first or last. */
    strcpy(sig, known);
    sig[0] = sig[0] == 'e' ? 'f' : 'e';
    assert_int_equal(verify(TS, sig, NOW), PAYSIG_BAD);
    strcpy(sig, known);
    sig[63] = sig[63] == 'd' ? 'c' : 'd';
    assert_int_equal(verify(TS, sig, NOW), PAYSIG_BAD);

    /* Uppercase hex is not what the contract specifies. */
    for (int i = 0; i < PAYSIG_HEX_LEN; i++)
        sig[i] = (char)toupper((unsigned char)known[i]);
    sig[PAYSIG_HEX_LEN] = '\0';
    assert_int_equal(verify(TS, sig, NOW), PAYSIG_BAD);

    /* Too short, too long. */
    memcpy(sig, known, 63);
    sig[63] = '\0';
    assert_int_equal(verify(TS, sig, NOW), PAYSIG_BAD);
    strcpy(sig, known);
    strcat(sig, "0");
    assert_int_equal(verify(TS, sig, NOW), PAYSIG_BAD);

    /* The right signature for another secret, body or timestamp. */
    paysig_sign("another-secret", TS, body, strlen(body), sig);
    assert_int_equal(verify(TS, sig, NOW), PAYSIG_BAD);
    assert_int_equal(paysig_verify(SECRET, TS, known, body, strlen(body) - 1, NOW, TOL),
                     PAYSIG_BAD);
    assert_int_equal(verify("1800000001", known, NOW), PAYSIG_BAD);
}

static void test_empty_secret_accepts_nothing(void **state)
{
    (void)state;
    char sig[PAYSIG_HEX_LEN + 1];
    /* Even a signature made with the empty key: an unset secret must not
     * turn the check into one anyone can pass. */
    paysig_sign("", TS, body, strlen(body), sig);
    assert_int_equal(paysig_verify("", TS, sig, body, strlen(body), NOW, TOL), PAYSIG_BAD);
    assert_int_equal(paysig_verify(NULL, TS, sig, body, strlen(body), NOW, TOL), PAYSIG_BAD);
}

static void test_timestamp_window(void **state)
{
    (void)state;
    /* The signature is genuine in each case; only the clock differs. */
    static const struct {
        int64_t now;
        enum paysig_result want;
    } cases[] = {
        {NOW, PAYSIG_OK},
        {NOW + TOL, PAYSIG_OK}, /* exactly tolerance away is still fine */
        {NOW - TOL, PAYSIG_OK},
        {NOW + TOL + 1, PAYSIG_STALE},
        {NOW - TOL - 1, PAYSIG_STALE},
        {NOW + 86400, PAYSIG_STALE},
        {0, PAYSIG_STALE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        enum paysig_result got = verify(TS, known, cases[i].now);
        if (got != cases[i].want)
            fail_msg("now %+lld s: %d, want %d", (long long)(cases[i].now - NOW), got,
                     cases[i].want);
    }
}

static void test_forgery_learns_nothing_about_the_clock(void **state)
{
    (void)state;
    char sig[PAYSIG_HEX_LEN + 1];
    strcpy(sig, known);
    sig[10] = sig[10] == '0' ? '1' : '0';
    /* A bad signature is BAD whether or not the timestamp is in range. */
    assert_int_equal(verify(TS, sig, NOW + 10000), PAYSIG_BAD);
    assert_int_equal(verify(TS, sig, NOW), PAYSIG_BAD);
}

static void test_timestamp_must_be_plain_seconds(void **state)
{
    (void)state;
    /* Signed by a (buggy) gateway exactly as sent, so only the number
     * itself is wrong. */
    static const char *const stamps[] = {
        "+1800000000",
        " 1800000000",
        "1800000000 ",
        "1800000000.0",
        "1.8e9",
        "-1",
        "",
        "abc",
        "18000000000000000000000",
    };
    for (size_t i = 0; i < sizeof stamps / sizeof stamps[0]; i++) {
        char sig[PAYSIG_HEX_LEN + 1];
        paysig_sign(SECRET, stamps[i], body, strlen(body), sig);
        if (verify(stamps[i], sig, NOW) != PAYSIG_BAD)
            fail_msg("timestamp '%s' accepted", stamps[i]);
    }
}

static void test_raw_bytes_are_signed(void **state)
{
    (void)state;
    char a[PAYSIG_HEX_LEN + 1], b[PAYSIG_HEX_LEN + 1];
    /* An empty body, given as NULL. */
    paysig_sign(SECRET, TS, NULL, 0, a);
    assert_int_equal(paysig_verify(SECRET, TS, a, NULL, 0, NOW, TOL), PAYSIG_OK);
    assert_int_equal(paysig_verify(SECRET, TS, a, "", 0, NOW, TOL), PAYSIG_OK);

    /* Bytes after a NUL count: the body is len bytes, not a C string. */
    static const char raw1[] = {'{', '}', '\0', 'x'};
    static const char raw2[] = {'{', '}', '\0', 'y'};
    paysig_sign(SECRET, TS, raw1, sizeof raw1, a);
    paysig_sign(SECRET, TS, raw2, sizeof raw2, b);
    assert_string_not_equal(a, b);
    assert_int_equal(paysig_verify(SECRET, TS, a, raw1, sizeof raw1, NOW, TOL), PAYSIG_OK);
    assert_int_equal(paysig_verify(SECRET, TS, a, raw2, sizeof raw2, NOW, TOL), PAYSIG_BAD);

    /* Whitespace is part of what was signed: no re-encoding of the JSON. */
    static const char spaced[] = "{ \"a\": 1 }";
    paysig_sign(SECRET, TS, spaced, strlen(spaced), a);
    assert_int_equal(paysig_verify(SECRET, TS, a, "{\"a\":1}", 7, NOW, TOL), PAYSIG_BAD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_signature),
        cmocka_unit_test(test_bad_signatures),
        cmocka_unit_test(test_empty_secret_accepts_nothing),
        cmocka_unit_test(test_timestamp_window),
        cmocka_unit_test(test_forgery_learns_nothing_about_the_clock),
        cmocka_unit_test(test_timestamp_must_be_plain_seconds),
        cmocka_unit_test(test_raw_bytes_are_signed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
