/* test_defences.c - TICKETD_DEFENSES: which defences a list switches on,
 * and that switching any off is refused outside the demo environment. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "defences.h"
#include "err.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

#define ALL DEFENCES_ALL

static void test_parse_table(void **state)
{
    (void)state;
    static const struct {
        const char *spec;
        int rc;
        unsigned want;
    } cases[] = {
        {"all", TD_OK, ALL},
        {"none", TD_OK, 0},
        {"-token", TD_OK, ALL & ~DEFENCE_TOKEN},
        {"-session-lock", TD_OK, ALL & ~DEFENCE_SESSION_LOCK},
        {"all,-token,-session-lock", TD_OK, ALL & ~(DEFENCE_TOKEN | DEFENCE_SESSION_LOCK)},
        {"-token,-session-lock", TD_OK, ALL & ~(DEFENCE_TOKEN | DEFENCE_SESSION_LOCK)},
        {"none,token", TD_OK, DEFENCE_TOKEN},
        {"token", TD_OK, DEFENCE_TOKEN},
        {"token,unique-index", TD_OK, DEFENCE_TOKEN | DEFENCE_UNIQUE_INDEX},
        {"none,token,-token", TD_OK, 0},
        {"-all", TD_OK, 0},
        {"-all,stock-cas", TD_OK, DEFENCE_STOCK_CAS},
        {"all,-response-cache,-inflight-key", TD_OK,
         ALL & ~(DEFENCE_RESPONSE_CACHE | DEFENCE_INFLIGHT_KEY)},
        {"-stock-cas,-unique-index,-callback-dedup,-consumer-dedup", TD_OK,
         ALL & ~(DEFENCE_STOCK_CAS | DEFENCE_UNIQUE_INDEX | DEFENCE_CALLBACK_DEDUP |
                 DEFENCE_CONSUMER_DEDUP)},
        /* The articles' pitfalls, one at a time and together. */
        {"-token-atomic", TD_OK, ALL & ~DEFENCE_TOKEN_ATOMIC},
        {"-lock-owner-check", TD_OK, ALL & ~DEFENCE_LOCK_OWNER_CHECK},
        {"-consumer-dedup-same-tx", TD_OK, ALL & ~DEFENCE_CONSUMER_DEDUP_SAME_TX},
        {"-consumer-dedup-business-key", TD_OK, ALL & ~DEFENCE_CONSUMER_DEDUP_BUSINESS_KEY},
        {"-state-cas", TD_OK, ALL & ~DEFENCE_STATE_CAS},
        {"-forget-failures", TD_OK, ALL & ~DEFENCE_FORGET_FAILURES},
        {"-business-key-after-expiry", TD_OK, ALL & ~DEFENCE_BUSINESS_KEY_AFTER_EXPIRY},
        /* bloom is not a prefix of bloom-liveness. */
        {"-bloom", TD_OK, ALL & ~DEFENCE_BLOOM},
        {"-bloom-liveness", TD_OK, ALL & ~DEFENCE_BLOOM_LIVENESS},
        {"-session-lock,-token-atomic", TD_OK,
         ALL & ~(DEFENCE_SESSION_LOCK | DEFENCE_TOKEN_ATOMIC)},
        /* consumer-dedup is not a prefix of its two details: each is its own bit. */
        {"-consumer-dedup", TD_OK, ALL & ~DEFENCE_CONSUMER_DEDUP},
        {"none,state-cas,forget-failures", TD_OK, DEFENCE_STATE_CAS | DEFENCE_FORGET_FAILURES},
        {"-consumer-dedup-business", TD_EINVAL, 0},
        {"-token_atomic", TD_EINVAL, 0},
        {"-state-cas-", TD_EINVAL, 0},
        {"-forget-failure", TD_EINVAL, 0},
        /* Later items win. */
        {"-token,all", TD_OK, ALL},
        {"token,none", TD_OK, 0},
        {"token,", TD_OK, DEFENCE_TOKEN},
        /* Errors. */
        {"", TD_EINVAL, 0},
        {"tokens", TD_EINVAL, 0},
        {"Token", TD_EINVAL, 0},
        {"all,-tokn", TD_EINVAL, 0},
        {"-none", TD_EINVAL, 0},
        {"token,,session-lock", TD_EINVAL, 0},
        {",token", TD_EINVAL, 0},
        {"all, -token", TD_EINVAL, 0},
        {"--token", TD_EINVAL, 0},
        {"response-cache-and-then-some-more-words", TD_EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[128] = "";
        unsigned on = 0x1234;
        int rc = defences_parse(cases[i].spec, &on, err, sizeof err);
        if (rc != cases[i].rc)
            fail_msg("'%s': rc %d, want %d (%s)", cases[i].spec, rc, cases[i].rc, err);
        if (rc == TD_OK && on != cases[i].want)
            fail_msg("'%s': 0x%x, want 0x%x", cases[i].spec, on, cases[i].want);
        if (rc != TD_OK) {
            assert_true(strlen(err) > 0);
            /* Nothing half-parsed is handed out. */
            assert_int_equal(on, 0x1234);
        }
    }
}

static void test_error_names_the_item(void **state)
{
    (void)state;
    char err[128] = "";
    unsigned on;
    assert_int_equal(defences_parse("all,-tokn", &on, err, sizeof err), TD_EINVAL);
    assert_non_null(strstr(err, "tokn"));
}

/* Every row of the table (defences.def): its bit is the one it always had,
 * its name parses back to that bit alone, "-name" takes that bit alone away,
 * and "all" is exactly the rows. */
static const struct {
    enum defence d;
    unsigned bit;
    const char *name;
    const char *harm;
} rows[] = {
#define DEFENCE(id, bit, name, lesson, anchor, harm) {DEFENCE_##id, bit, name, harm},
#include "defences.def"
#undef DEFENCE
};

#define N_ROWS (sizeof rows / sizeof rows[0])

static void test_table_bits_unchanged(void **state)
{
    (void)state;
    /* Other code, logs and the lab's records name these numbers. */
    assert_int_equal(DEFENCE_RESPONSE_CACHE, 1u << 0);
    assert_int_equal(DEFENCE_CONSUMER_DEDUP, 1u << 7);
    assert_int_equal(DEFENCE_TOKEN_ATOMIC, 1u << 8);
    assert_int_equal(DEFENCE_STATE_CAS, 1u << 12);
    assert_int_equal(DEFENCE_BLOOM_LIVENESS, 1u << 17);
    assert_int_equal(DEFENCES_ALL, 0x3ffffu);
    for (size_t i = 0; i < N_ROWS; i++)
        assert_int_equal(rows[i].d, 1u << rows[i].bit);
}

static void test_names(void **state)
{
    (void)state;
    unsigned all = 0;
    for (size_t i = 0; i < N_ROWS; i++) {
        /* No two rows share a bit or a name. */
        assert_int_equal(all & rows[i].d, 0);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(rows[i].name, rows[j].name);
        assert_true(strlen(rows[i].harm) > 0);
        assert_string_equal(defence_name(rows[i].d), rows[i].name);
        char err[128];
        unsigned on;
        assert_int_equal(defences_parse(rows[i].name, &on, err, sizeof err), TD_OK);
        assert_int_equal(on, rows[i].d);
        char off[64];
        snprintf(off, sizeof off, "-%s", rows[i].name);
        assert_int_equal(defences_parse(off, &on, err, sizeof err), TD_OK);
        assert_int_equal(on, DEFENCES_ALL & ~rows[i].d);
        all |= rows[i].d;
    }
    assert_int_equal(all, DEFENCES_ALL);
    char err[128];
    unsigned on;
    assert_int_equal(defences_parse("all", &on, err, sizeof err), TD_OK);
    assert_int_equal(on, all);
    assert_string_equal(defence_name((enum defence)0), "unknown");
    assert_string_equal(defence_name((enum defence)(1u << 20)), "unknown");
}

static void test_check_env(void **state)
{
    (void)state;
    static const struct {
        unsigned on;
        const char *env;
        int want;
    } cases[] = {
        {ALL, "production", TD_OK},
        {ALL, "dev", TD_OK},
        {ALL, "demo", TD_OK},
        {ALL & ~DEFENCE_TOKEN, "demo", TD_OK},
        {0, "demo", TD_OK},
        {ALL & ~DEFENCE_TOKEN, "production", TD_EINVAL},
        {ALL & ~DEFENCE_CONSUMER_DEDUP, "production", TD_EINVAL},
        {ALL & ~DEFENCE_STOCK_CAS, "dev", TD_EINVAL},
        {ALL & ~DEFENCE_UNIQUE_INDEX, "test", TD_EINVAL},
        {0, "production", TD_EINVAL},
        {ALL & ~DEFENCE_TOKEN, "Demo", TD_EINVAL},
        {ALL & ~DEFENCE_TOKEN, "", TD_EINVAL},
        {ALL & ~DEFENCE_STATE_CAS, "production", TD_EINVAL},
        {ALL & ~DEFENCE_FORGET_FAILURES, "dev", TD_EINVAL},
        {ALL & ~DEFENCE_TOKEN_ATOMIC, "demo", TD_OK},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = defences_check_env(cases[i].on, cases[i].env);
        if (rc != cases[i].want)
            fail_msg("0x%x in '%s': rc %d, want %d", cases[i].on, cases[i].env, rc, cases[i].want);
    }
}

int main(void)
{
    /* check_env warns about every switched-off defence; that is expected
     * here and would only bury the test output. */
    log_set_level(LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_table),
        cmocka_unit_test(test_error_names_the_item),
        cmocka_unit_test(test_table_bits_unchanged),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_check_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
