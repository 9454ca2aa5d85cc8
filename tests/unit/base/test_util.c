/* test_util.c - the helpers everything leans on: strict integer parsing,
 * base64url and hex encodings, constant-time compare, randomness, clocks,
 * and the name this process goes by. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "loop.h"
#include "util.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static void test_parse_i64_table(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int64_t min, max;
        bool ok;
        int64_t want;
    } cases[] = {
        {"0", 0, 10, true, 0},
        {"10", 0, 10, true, 10},
        {"11", 0, 10, false, 0},
        {"7", 8, 10, false, 0},
        {"007", 0, 10, true, 7}, /* leading zeros are digits; callers that mind check */
        {"-1", 0, 10, false, 0}, /* no sign when min >= 0 */
        {"-1", -5, 10, true, -1},
        {"-6", -5, 10, false, 0},
        {"-0", -5, 10, true, 0},
        {"", 0, 10, false, 0},
        {"-", -5, 10, false, 0},
        {"+1", 0, 10, false, 0},
        {" 1", 0, 10, false, 0},
        {"1 ", 0, 10, false, 0},
        {"1\n", 0, 10, false, 0},
        {"1a", 0, 10, false, 0},
        {"0x1", 0, 10, false, 0},
        {"1.0", 0, 10, false, 0},
        {"1e1", 0, 100, false, 0},
        {"--1", INT64_MIN, 0, false, 0},
        {"9223372036854775807", 0, INT64_MAX, true, INT64_MAX},
        {"9223372036854775808", 0, INT64_MAX, false, 0},
        {"18446744073709551616", 0, INT64_MAX, false, 0},
        {"-9223372036854775808", INT64_MIN, 0, true, INT64_MIN},
        {"-9223372036854775809", INT64_MIN, 0, false, 0},
        {"99999999999999999999999999999", INT64_MIN, INT64_MAX, false, 0},
        {"9007199254740991", 1, 9007199254740991, true, 9007199254740991},
        {"9007199254740992", 1, 9007199254740991, false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t out = 4242;
        bool ok = parse_i64(cases[i].s, cases[i].min, cases[i].max, &out);
        if (ok != cases[i].ok)
            fail_msg("'%s' in [%lld, %lld]: %s", cases[i].s, (long long)cases[i].min,
                     (long long)cases[i].max, ok ? "accepted" : "refused");
        /* *out is set only on success. */
        assert_int_equal(out, ok ? cases[i].want : 4242);
    }
    int64_t out = 1;
    assert_false(parse_i64(NULL, 0, 10, &out));
    assert_int_equal(out, 1);
}

static void test_b64url(void **state)
{
    (void)state;
    /* RFC 4648 section 10, in the URL alphabet without padding. */
    static const struct {
        const char *in;
        size_t n;
        const char *want;
    } cases[] = {
        {"", 0, ""},
        {"f", 1, "Zg"},
        {"fo", 2, "Zm8"},
        {"foo", 3, "Zm9v"},
        {"foob", 4, "Zm9vYg"},
        {"fooba", 5, "Zm9vYmE"},
        {"foobar", 6, "Zm9vYmFy"},
        /* '-' and '_' where standard base64 has '+' and '/'. */
        {"\xfb\xff", 2, "-_8"},
        {"\xfb\xef\xbe", 3, "----"},
        {"\xff\xff\xff", 3, "____"},
        {"\0\0\0", 3, "AAAA"},
        {"\0", 1, "AA"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[32];
        memset(out, 'x', sizeof out);
        assert_int_equal(b64url_len(cases[i].n), strlen(cases[i].want));
        b64url_encode((const unsigned char *)cases[i].in, cases[i].n, out);
        assert_string_equal(out, cases[i].want);
    }
    /* The length formula holds for every size up to a token's 32 bytes. */
    unsigned char raw[64];
    memset(raw, 0xa5, sizeof raw);
    for (size_t n = 0; n <= sizeof raw; n++) {
        char out[128];
        b64url_encode(raw, n, out);
        assert_int_equal(strlen(out), b64url_len(n));
    }
    assert_int_equal(b64url_len(32), 43); /* what api_tokens.c prints */
}

static void test_hex(void **state)
{
    (void)state;
    static const unsigned char in[] = {0x00, 0xff, 0x10, 0xab, 0x7f, 0x80};
    char out[2 * sizeof in + 1];
    hex_encode(in, sizeof in, out);
    assert_string_equal(out, "00ff10ab7f80");
    hex_encode(in, 0, out);
    assert_string_equal(out, "");
}

static void test_ct_equal(void **state)
{
    (void)state;
    static const char a[] = "0123456789abcdef";
    char b[sizeof a];
    memcpy(b, a, sizeof a);
    assert_true(ct_equal(a, b, 16));
    assert_true(ct_equal(a, b, 0));
    b[0] = 'x';
    assert_false(ct_equal(a, b, 16));
    memcpy(b, a, sizeof a);
    b[15] = 'x';
    assert_false(ct_equal(a, b, 16));
    /* Only n bytes are compared. */
    assert_true(ct_equal(a, b, 15));
    /* A difference in one bit. */
    memcpy(b, a, sizeof a);
    b[7] ^= 0x01;
    assert_false(ct_equal(a, b, 16));
}

static void test_strings(void **state)
{
    (void)state;
    char *s = xstrdup("ticketd");
    assert_string_equal(s, "ticketd");
    free(s);
    s = xstrndup("ticketd", 6);
    assert_string_equal(s, "ticket");
    free(s);
    s = xstrndup("a\0b", 3); /* n bytes, even past a NUL */
    assert_memory_equal(s, "a\0b", 4);
    free(s);
    s = xasprintf("%s:%d:%lld", "k", 7, (long long)INT64_MIN);
    assert_string_equal(s, "k:7:-9223372036854775808");
    free(s);
    /* Longer than any internal first guess. */
    char big[3000];
    memset(big, 'y', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    s = xasprintf("<%s>", big);
    assert_int_equal(strlen(s), sizeof big + 1);
    free(s);
    /* Zero-size allocations still give a pointer to free. */
    void *p = xmalloc(0);
    assert_non_null(p);
    free(p);
    p = xcalloc(0, 0);
    assert_non_null(p);
    free(p);
    p = xrealloc(NULL, 0);
    assert_non_null(p);
    free(p);
    int *z = xcalloc(16, sizeof *z);
    for (int i = 0; i < 16; i++)
        assert_int_equal(z[i], 0);
    free(z);
}

static void test_random(void **state)
{
    (void)state;
    unsigned char a[32] = {0}, b[32] = {0}, zero[32] = {0};
    rand_bytes(a, sizeof a);
    rand_bytes(b, sizeof b);
    /* 256 bits: all-zero or equal outputs mean the generator is broken. */
    assert_memory_not_equal(a, zero, sizeof a);
    assert_memory_not_equal(a, b, sizeof a);
    rand_bytes(a, 0);

    assert_int_equal(rand_below(1), 0);
    int seen[10] = {0};
    for (int i = 0; i < 2000; i++) {
        uint64_t v = rand_below(10);
        assert_true(v < 10);
        seen[v]++;
    }
    /* Every digit turns up (an order number draws 14 of them). */
    for (int d = 0; d < 10; d++)
        assert_true(seen[d] > 0);
    for (int i = 0; i < 100; i++)
        assert_true(rand_below(UINT64_MAX) < UINT64_MAX);
}

static void test_clocks(void **state)
{
    (void)state;
    int64_t t0 = mono_ms();
    int64_t n0 = mono_ns();
    sleep_ms(20);
    int64_t t1 = mono_ms();
    int64_t n1 = mono_ns();
    assert_true(t1 - t0 >= 20);
    assert_true(n1 - n0 >= 20 * 1000000LL);
    assert_true(t1 - t0 < 5000);
    sleep_ms(0);
    /* Seconds since 1970, and after the time this test was written. */
    assert_true(wall_s() > 1700000000);
}

static void test_b64url_decode(void **state)
{
    (void)state;
    unsigned char out[16];
    char enc[32];
    /* Every length round-trips. */
    const unsigned char raw[] = {0x00, 0xff, 0x10, 0x83, 0xfe, 0x7f, 0x01, 0x80};
    for (size_t n = 0; n <= sizeof raw; n++) {
        b64url_encode(raw, n, enc);
        assert_int_equal(b64url_decode(enc, strlen(enc), out, sizeof out), (long)n);
        assert_memory_equal(out, raw, n);
    }
    assert_int_equal(b64url_decode("TWFu", 4, out, sizeof out), 3);
    assert_memory_equal(out, "Man", 3);
    /* No padding, no standard-alphabet characters, no spaces. */
    assert_int_equal(b64url_decode("TWE=", 4, out, sizeof out), -1);
    assert_int_equal(b64url_decode("+/8A", 4, out, sizeof out), -1);
    assert_int_equal(b64url_decode("TW E", 4, out, sizeof out), -1);
    /* 4k+1 characters cannot be bytes. */
    assert_int_equal(b64url_decode("TWFuT", 5, out, sizeof out), -1);
    /* "TWE" is "Ma"; "TWF" spells it too, with a bit set the bytes lack. */
    assert_int_equal(b64url_decode("TWE", 3, out, sizeof out), 2);
    assert_int_equal(b64url_decode("TWF", 3, out, sizeof out), -1);
    /* Room is checked before anything is written past it. */
    assert_int_equal(b64url_decode("TWFu", 4, out, 2), -1);
    assert_int_equal(b64url_decode("TWE", 3, out, 2), 2);
}

/* The name of a consumer or a lease holder: the host, the pid and a tag
 * drawn once, so that two processes with the same host name and pid (two
 * containers, each its server as pid 1) still go by different names. */
static void test_process_name(void **state)
{
    (void)state;
    char a[96], b[96], host[64], want[96];
    process_name(a, sizeof a);
    process_name(b, sizeof b);
    assert_string_equal(a, b); /* the same all the process's life */
    assert_int_equal(gethostname(host, sizeof host), 0);
    host[sizeof host - 1] = '\0';
    int len = snprintf(want, sizeof want, "%s-%d-", host, (int)getpid());
    assert_memory_equal(a, want, (size_t)len);
    const char *tag = a + len;
    assert_int_equal(strlen(tag), 8);
    assert_true(strspn(tag, "0123456789abcdef") == 8);
    char small[8];
    process_name(small, sizeof small); /* cut, never overrun */
    assert_int_equal(strlen(small), sizeof small - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_i64_table), cmocka_unit_test(test_b64url_decode),
        cmocka_unit_test(test_b64url),          cmocka_unit_test(test_hex),
        cmocka_unit_test(test_ct_equal),        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_random),          cmocka_unit_test(test_clocks),
        cmocka_unit_test(test_process_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
