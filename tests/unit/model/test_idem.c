/* test_idem.c - the Idempotency-Key header, the payload fingerprint and the
 * text of the records kept under a key. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "idem.h"
#include "util.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void test_key_table(void **state)
{
    (void)state;
    static const char k64[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    static const char k65[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0";
    static const char q64[] =
        "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"";
    static const char q65[] =
        "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0\"";
    static const struct {
        const char *header;
        const char *want; /* NULL: refused */
    } cases[] = {
        {"abc", "abc"},
        {"a", "a"},
        {"order-2026.12.01_7:retry", "order-2026.12.01_7:retry"},
        {"550e8400-e29b-41d4-a716-446655440000", "550e8400-e29b-41d4-a716-446655440000"},
        {k64, k64},
        {k65, NULL},
        /* The structured-field string form of the IETF draft. */
        {"\"abc\"", "abc"},
        {q64, k64},
        {q65, NULL},
        {"\"\"", NULL},
        {"\"", NULL},
        {"\"abc", NULL},
        {"abc\"", NULL},
        {"\"a\"b\"", NULL},
        {"\"\"abc\"\"", NULL},
        {"'abc'", NULL},
        /* Characters outside [A-Za-z0-9._:-]. */
        {"", NULL},
        {" abc", NULL},
        {"abc ", NULL},
        {"a b", NULL},
        {"a/b", NULL},
        {"a+b", NULL},
        {"a=b", NULL},
        {"a|b", NULL},  /* the record separator */
        {"a{b}", NULL}, /* the Redis hash tag */
        {"a\tb", NULL},
        {"a\r\nb", NULL},
        {"caf\xc3\xa9", NULL},
        {"\"a b\"", NULL},
        {NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[IDEM_KEY_MAX + 1];
        memset(out, 'x', sizeof out);
        bool ok = idem_parse_key(cases[i].header, out);
        if (cases[i].want == NULL) {
            if (ok)
                fail_msg("accepted '%s'", cases[i].header);
        } else {
            if (!ok)
                fail_msg("refused '%s'", cases[i].header);
            assert_string_equal(out, cases[i].want);
        }
    }
}

static void test_fingerprint(void **state)
{
    (void)state;
    char a[IDEM_FP_LEN + 1], b[IDEM_FP_LEN + 1];

    /* 64 lowercase hex digits. */
    idem_fingerprint_order(7, 2, a);
    assert_int_equal(strlen(a), IDEM_FP_LEN);
    assert_int_equal(strspn(a, "0123456789abcdef"), IDEM_FP_LEN);

    /* Pinned: records already stored under keys (in Redis, up to
     * TICKETD_IDEM_TTL_S) carry fingerprints made this way, so changing
     * the canonical form turns every retry after a deploy into a 422.
     * This is SHA-256 of "POST /api/v1/orders\nsession_id=7\nquantity=2\n". */
    assert_string_equal(a, "c04a3ff365b1c5e27e50b3ae8690758287477c9fb377d89c8145f580bc28dcc5");

    /* Stable. */
    idem_fingerprint_order(7, 2, b);
    assert_string_equal(a, b);

    /* Sensitive to each field, and the fields do not run into each other. */
    idem_fingerprint_order(7, 3, b);
    assert_string_not_equal(a, b);
    idem_fingerprint_order(8, 2, b);
    assert_string_not_equal(a, b);
    idem_fingerprint_order(2, 7, b);
    assert_string_not_equal(a, b);
    idem_fingerprint_order(1, 23, a);
    idem_fingerprint_order(12, 3, b);
    assert_string_not_equal(a, b);

    /* Extremes fit the canonical buffer. */
    idem_fingerprint_order(INT64_MAX, INT64_MIN, a);
    assert_int_equal(strlen(a), IDEM_FP_LEN);
}

static void test_owner(void **state)
{
    (void)state;
    char inst[IDEM_INSTANCE_LEN + 1], other[IDEM_INSTANCE_LEN + 1], got[IDEM_INSTANCE_LEN + 1];
    char a[IDEM_OWNER_LEN + 1], b[IDEM_OWNER_LEN + 1];
    idem_new_instance(inst);
    idem_new_instance(other);
    assert_int_equal(strlen(inst), IDEM_INSTANCE_LEN);
    assert_string_not_equal(inst, other);
    idem_new_owner(inst, a);
    idem_new_owner(inst, b);
    assert_int_equal(strlen(a), IDEM_OWNER_LEN);
    assert_int_equal(strspn(a, "0123456789abcdef"), IDEM_OWNER_LEN);
    /* 64 random bits per request: two owners are never the same ... */
    assert_string_not_equal(a, b);
    /* ... and each names its process. */
    idem_owner_instance(a, got);
    assert_string_equal(got, inst);
}

static void fp_of(int64_t session, char *out)
{
    idem_fingerprint_order(session, 1, out);
}

static void test_marker_round_trip(void **state)
{
    (void)state;
    char fp[IDEM_FP_LEN + 1], owner[IDEM_OWNER_LEN + 1];
    fp_of(7, fp);
    idem_new_owner("0123456789abcdef", owner);
    char *m = idem_marker(fp, owner);
    struct idem_record r;
    assert_true(idem_parse(m, strlen(m), &r));
    assert_false(r.done);
    assert_string_equal(r.fingerprint, fp);
    assert_string_equal(r.owner, owner);
    /* A marker without a whole owner is no marker. */
    assert_false(idem_parse(m, strlen(m) - 1, &r));
    assert_int_equal(r.status, 0);
    assert_null(r.body);
    /* Marked watched by a waiting copy, it is the same marker. */
    m[0] = 'W';
    assert_true(idem_parse(m, strlen(m), &r));
    assert_false(r.done);
    assert_string_equal(r.fingerprint, fp);
    assert_string_equal(r.owner, owner);
    m[0] = 'P';
    /* Two requests' markers differ even for the same payload. */
    char owner2[IDEM_OWNER_LEN + 1];
    idem_new_owner("0123456789abcdef", owner2);
    char *m2 = idem_marker(fp, owner2);
    assert_string_not_equal(m, m2);
    free(m);
    free(m2);
}

static void test_done_round_trip(void **state)
{
    (void)state;
    char fp[IDEM_FP_LEN + 1];
    fp_of(9, fp);
    static const char *const bodies[] = {
        "{\"order_no\":\"26120112345678901234\",\"quantity\":2}",
        "a|b|c", /* the separator inside the body is the body's */
        "",
        "line\nbreak",
    };
    /* Only successes are recorded: a 4xx or 5xx record is malformed. */
    static const int statuses[] = {201, 200, 201, 299};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        size_t n = strlen(bodies[i]);
        char *d = idem_done(fp, statuses[i], bodies[i], n);
        struct idem_record r;
        assert_true(idem_parse(d, strlen(d), &r));
        assert_true(r.done);
        assert_string_equal(r.fingerprint, fp);
        assert_int_equal(r.status, statuses[i]);
        assert_int_equal(r.body_len, n);
        assert_memory_equal(r.body, bodies[i], n);
        /* The body is borrowed from the text, not copied. */
        assert_true(r.body > d && r.body + r.body_len == d + strlen(d));
        free(d);
    }

    /* Only body_len bytes of the body are recorded. */
    char *d = idem_done(fp, 201, "abcdef", 3);
    struct idem_record r;
    assert_true(idem_parse(d, strlen(d), &r));
    assert_int_equal(r.body_len, 3);
    assert_memory_equal(r.body, "abc", 3);
    free(d);
}

static void test_parse_honours_length(void **state)
{
    (void)state;
    char fp[IDEM_FP_LEN + 1];
    fp_of(3, fp);
    char *d = idem_done(fp, 201, "{\"x\":1}", 7);
    size_t n = strlen(d);
    struct idem_record r;
    /* Cut inside the body: a shorter body. */
    assert_true(idem_parse(d, n - 2, &r));
    assert_int_equal(r.body_len, 5);
    /* Cut before the body: status and separator still there, body empty. */
    size_t head = 2 + IDEM_FP_LEN + 1 + 3 + 1;
    assert_true(idem_parse(d, head, &r));
    assert_int_equal(r.body_len, 0);
    /* Cut inside the status: malformed. */
    assert_false(idem_parse(d, head - 1, &r));
    assert_false(idem_parse(d, head - 2, &r));
    free(d);
}

static void test_malformed_records(void **state)
{
    (void)state;
    char fp[IDEM_FP_LEN + 1];
    fp_of(5, fp);
    char *cases[] = {
        xstrdup(""),
        xasprintf("P"),
        xasprintf("P|"),
        xasprintf("P|%.63s", fp),       /* fingerprint cut short */
        xasprintf("P|%.63s|owner", fp), /* separator in the wrong place */
        xasprintf("P%s|owner", fp),     /* no separator after the kind */
        xasprintf("X|%s|owner", fp),    /* unknown kind */
        xasprintf("p|%s|owner", fp),
        xasprintf("D|%s", fp),
        xasprintf("D|%s|", fp),
        xasprintf("D|%s|201", fp),
        xasprintf("D|%s|20|{}", fp),
        xasprintf("D|%s|2011|{}", fp),
        xasprintf("D|%s|2x1|{}", fp),
        xasprintf("D|%s|-01|{}", fp),
        xasprintf("D|%s| 201|{}", fp),
        xasprintf("D|%s201|{}", fp),
        xasprintf("garbage that is long enough to pass the length check, surely, surely yes"),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct idem_record r;
        if (idem_parse(cases[i], strlen(cases[i]), &r))
            fail_msg("accepted '%s'", cases[i]);
        free(cases[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_table),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_owner),
        cmocka_unit_test(test_marker_round_trip),
        cmocka_unit_test(test_done_round_trip),
        cmocka_unit_test(test_parse_honours_length),
        cmocka_unit_test(test_malformed_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
