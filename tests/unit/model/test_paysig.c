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

/* ---- Standard Webhooks ------------------------------------------------ */

/* The example of the Standard Webhooks specification: a whsec_ secret,
 * its id, timestamp and payload, and the signature every implementation
 * must produce (checked here again with Python's hmac and base64). */
#define SW_SECRET  "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SW_ID      "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define SW_TS      "1614265330"
#define SW_NOW     ((int64_t)1614265330)
#define SW_PAYLOAD "{\"test\": 2432232314}"
#define SW_SIG     "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

/* HMAC-SHA256("pay-secret-0123456789", "msg-1." TS "." body), base64, by
 * `python3 -c 'import hmac,hashlib,base64; ...'`: a secret without whsec_
 * keys with its own bytes. */
#define PLAIN_SIG "v1,k80iO2VJDQMxnq5NlGOVY8VpnzgkvTWqdW1AsQWzjN4="

static struct paysig_keys keys_of(const char *setting)
{
    struct paysig_keys k;
    char why[160];
    if (!paysig_keys_parse(setting, &k, why, sizeof why))
        fail_msg("'%s' refused: %s", setting, why);
    return k;
}

static enum paysig_result sw_verify(const struct paysig_keys *k, const char *sigs, int64_t now)
{
    return paysig_verify_webhook(k, SW_ID, SW_TS, sigs, SW_PAYLOAD, strlen(SW_PAYLOAD), now, TOL);
}

static void test_webhook_known_signatures(void **state)
{
    (void)state;
    struct paysig_keys k = keys_of(SW_SECRET);
    char sig[PAYSIG_WEBHOOK_LEN + 1];
    paysig_sign_webhook(k.k[0].raw, k.k[0].raw_len, SW_ID, SW_TS, SW_PAYLOAD, strlen(SW_PAYLOAD),
                        sig);
    assert_string_equal(sig, SW_SIG);
    assert_int_equal(sw_verify(&k, SW_SIG, SW_NOW), PAYSIG_OK);

    struct paysig_keys plain = keys_of(SECRET);
    assert_int_equal(plain.k[0].raw_len, strlen(SECRET));
    assert_int_equal(
        paysig_verify_webhook(&plain, "msg-1", TS, PLAIN_SIG, body, strlen(body), NOW, TOL),
        PAYSIG_OK);
    /* The same text as an X-Pay secret keys with its bytes, whsec_ and all. */
    char hex[PAYSIG_HEX_LEN + 1];
    paysig_sign(SW_SECRET, TS, body, strlen(body), hex);
    assert_int_equal(paysig_verify_keys(&k, TS, hex, body, strlen(body), NOW, TOL), PAYSIG_OK);
}

static void test_webhook_signature_lists(void **state)
{
    (void)state;
    struct paysig_keys k = keys_of(SW_SECRET);
    static const struct {
        const char *list;
        enum paysig_result want;
    } cases[] = {
        {SW_SIG, PAYSIG_OK},
        /* One of several matches, wherever it stands. */
        {"v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= " SW_SIG, PAYSIG_OK},
        {SW_SIG " v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", PAYSIG_OK},
        {"v1a,c2lnbmF0dXJlIG9mIGFub3RoZXIgc2NoZW1l " SW_SIG, PAYSIG_OK},
        {"  " SW_SIG "  ", PAYSIG_OK},
        {"v2,abc  \t" SW_SIG, PAYSIG_OK},
        /* None does. */
        {"", PAYSIG_BAD},
        {" ", PAYSIG_BAD},
        {"v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", PAYSIG_BAD},
        {"V1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", PAYSIG_BAD},
        {"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE", PAYSIG_BAD},
        {"v1,g0hM9SsE-OTPJTGt_tmIKtSyZlE3uFJELVlNIOLJ1OE=", PAYSIG_BAD}, /* base64url */
        {"g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", PAYSIG_BAD},
        {"v1," SW_SIG, PAYSIG_BAD},
        {"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=,", PAYSIG_BAD},
        {"v1a,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", PAYSIG_BAD},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        enum paysig_result got = sw_verify(&k, cases[i].list, SW_NOW);
        if (got != cases[i].want)
            fail_msg("'%s': %d, want %d", cases[i].list, got, cases[i].want);
    }
    /* Headers missing. */
    assert_int_equal(
        paysig_verify_webhook(&k, NULL, SW_TS, SW_SIG, SW_PAYLOAD, strlen(SW_PAYLOAD), SW_NOW, TOL),
        PAYSIG_BAD);
    assert_int_equal(
        paysig_verify_webhook(&k, SW_ID, NULL, SW_SIG, SW_PAYLOAD, strlen(SW_PAYLOAD), SW_NOW, TOL),
        PAYSIG_BAD);
    assert_int_equal(
        paysig_verify_webhook(&k, SW_ID, SW_TS, NULL, SW_PAYLOAD, strlen(SW_PAYLOAD), SW_NOW, TOL),
        PAYSIG_BAD);
    /* Everything signed counts: the id, the timestamp, each body byte. */
    assert_int_equal(paysig_verify_webhook(&k, "msg_other", SW_TS, SW_SIG, SW_PAYLOAD,
                                           strlen(SW_PAYLOAD), SW_NOW, TOL),
                     PAYSIG_BAD);
    assert_int_equal(paysig_verify_webhook(&k, SW_ID, "1614265331", SW_SIG, SW_PAYLOAD,
                                           strlen(SW_PAYLOAD), SW_NOW, TOL),
                     PAYSIG_BAD);
    assert_int_equal(paysig_verify_webhook(&k, SW_ID, SW_TS, SW_SIG, SW_PAYLOAD,
                                           strlen(SW_PAYLOAD) - 1, SW_NOW, TOL),
                     PAYSIG_BAD);
}

static void test_webhook_timestamp_after_signature(void **state)
{
    (void)state;
    struct paysig_keys k = keys_of(SW_SECRET);
    assert_int_equal(sw_verify(&k, SW_SIG, SW_NOW + TOL), PAYSIG_OK);
    assert_int_equal(sw_verify(&k, SW_SIG, SW_NOW - TOL), PAYSIG_OK);
    assert_int_equal(sw_verify(&k, SW_SIG, SW_NOW + TOL + 1), PAYSIG_STALE);
    assert_int_equal(sw_verify(&k, SW_SIG, SW_NOW - TOL - 1), PAYSIG_STALE);
    /* A forgery is BAD, in the window or not. */
    assert_int_equal(
        sw_verify(&k, "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", SW_NOW + 9999),
        PAYSIG_BAD);
}

/* Two secrets during a rotation: either one's signature passes, in either
 * scheme, a third's does not. */
static void test_rotation(void **state)
{
    (void)state;
    struct paysig_keys k = keys_of("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw," SECRET);
    assert_int_equal(k.n, 2);
    assert_int_equal(sw_verify(&k, SW_SIG, SW_NOW), PAYSIG_OK);
    assert_int_equal(
        paysig_verify_webhook(&k, "msg-1", TS, PLAIN_SIG, body, strlen(body), NOW, TOL), PAYSIG_OK);
    assert_int_equal(paysig_verify_keys(&k, TS, known, body, strlen(body), NOW, TOL), PAYSIG_OK);

    struct paysig_keys third = keys_of("whsec_bmV3LWtleS1ieXRlcyEh");
    char sig[PAYSIG_WEBHOOK_LEN + 1], hex[PAYSIG_HEX_LEN + 1];
    paysig_sign_webhook(third.k[0].raw, third.k[0].raw_len, SW_ID, SW_TS, SW_PAYLOAD,
                        strlen(SW_PAYLOAD), sig);
    assert_int_equal(sw_verify(&k, sig, SW_NOW), PAYSIG_BAD);
    paysig_sign("a-third-secret", TS, body, strlen(body), hex);
    assert_int_equal(paysig_verify_keys(&k, TS, hex, body, strlen(body), NOW, TOL), PAYSIG_BAD);
    /* STALE from a matching secret is the answer, not BAD from the other. */
    assert_int_equal(paysig_verify_keys(&k, TS, known, body, strlen(body), NOW + TOL + 1, TOL),
                     PAYSIG_STALE);
}

static void test_secret_settings(void **state)
{
    (void)state;
    struct paysig_keys k;
    char why[160];
    k = keys_of("  new-secret , old-secret\t");
    assert_int_equal(k.n, 2);
    assert_string_equal(k.k[0].text, "new-secret");
    assert_string_equal(k.k[1].text, "old-secret");
    k = keys_of("whsec_bmV3LWtleS1ieXRlcyEh");
    assert_int_equal(k.n, 1);
    assert_int_equal(k.k[0].raw_len, 15);
    assert_memory_equal(k.k[0].raw, "new-key-bytes!!", 15);
    /* "whsec_" alone is an ordinary secret: nothing follows the prefix. */
    k = keys_of("whsec_");
    assert_int_equal(k.k[0].raw_len, 6);

    static const char *const bad[] = {
        "",
        ",",
        "a,",
        ",a",
        "a, ,b",
        "a,b,c",
        "whsec_not base64",
        "whsec_bmV3LWtleS1ieXRlcyE",
        "whsec_bmV3LWtleS1ieXRlcyEh=",
        "whsec_bmV3-LWtleS1ieXRlcyEh",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&k, 0xAA, sizeof k);
        if (paysig_keys_parse(bad[i], &k, why, sizeof why))
            fail_msg("'%s' accepted", bad[i]);
        assert_int_equal(k.n, 0);
        assert_true(why[0] != '\0');
    }
    assert_false(paysig_keys_parse(NULL, &k, why, sizeof why));
    char longest[PAYSIG_SECRET_MAX + 2];
    memset(longest, 'x', sizeof longest);
    longest[PAYSIG_SECRET_MAX] = '\0';
    assert_true(paysig_keys_parse(longest, &k, why, sizeof why));
    longest[PAYSIG_SECRET_MAX] = 'x';
    longest[PAYSIG_SECRET_MAX + 1] = '\0';
    assert_false(paysig_keys_parse(longest, &k, why, sizeof why));
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
        cmocka_unit_test(test_webhook_known_signatures),
        cmocka_unit_test(test_webhook_signature_lists),
        cmocka_unit_test(test_webhook_timestamp_after_signature),
        cmocka_unit_test(test_rotation),
        cmocka_unit_test(test_secret_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
