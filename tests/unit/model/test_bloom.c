/* test_bloom.c - the order-key filter's sizing and positions. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "bloom.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The textbook shapes: 1% wants ~9.6 bits a key and 7 positions, 0.1%
 * ~14.4 and 10; and the ceiling of a Redis string holds. */
static void test_sizes(void **state)
{
    (void)state;
    static const struct {
        int64_t n, ppm;
        uint64_t m_min, m_max;
        int k;
    } cases[] = {
        {1000000, 10000, 9585000, 9586000, 7},
        {1000000, 1000, 14377000, 14378000, 10},
        {1000, 500000, 1400, 1500, 1},
        {400000000, 1, BLOOM_MAX_BITS, BLOOM_MAX_BITS, 7},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct bloom_shape s = bloom_size(cases[i].n, cases[i].ppm);
        if (s.m < cases[i].m_min || s.m > cases[i].m_max || s.k != cases[i].k)
            fail_msg("case %zu: m %llu k %d", i, (unsigned long long)s.m, s.k);
    }
}

/* Same key, same positions; each within m; users and keys apart. */
static void test_positions(void **state)
{
    (void)state;
    struct bloom_shape s = bloom_size(1000000, 10000);
    uint64_t a[BLOOM_MAX_K], b[BLOOM_MAX_K], c[BLOOM_MAX_K];
    bloom_positions(s, 7, "key-1", a);
    bloom_positions(s, 7, "key-1", b);
    bloom_positions(s, 8, "key-1", c);
    assert_memory_equal(a, b, sizeof(uint64_t) * (size_t)s.k);
    assert_memory_not_equal(a, c, sizeof(uint64_t) * (size_t)s.k);
    for (int i = 0; i < s.k; i++) {
        assert_true(a[i] < s.m);
        for (int j = 0; j < i; j++)
            assert_true(a[i] != a[j]);
    }
}

/* Measured, not assumed: a filter filled with n keys gives about the
 * rate it was sized for on n keys it never saw (bounded: 2x). */
static void test_false_positive_rate(void **state)
{
    (void)state;
    const int n = 20000;
    struct bloom_shape s = bloom_size(n, 10000);
    unsigned char *bits = calloc((size_t)(s.m / 8 + 1), 1);
    uint64_t p[BLOOM_MAX_K];
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "in-%d", i);
        bloom_positions(s, i, key, p);
        for (int j = 0; j < s.k; j++)
            bits[p[j] / 8] |= (unsigned char)(1u << (p[j] % 8));
    }
    int fp = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "out-%d", i);
        bloom_positions(s, i, key, p);
        bool all = true;
        for (int j = 0; j < s.k && all; j++)
            all = (bits[p[j] / 8] >> (p[j] % 8)) & 1u;
        fp += all;
    }
    free(bits);
    print_message("false positives: %d of %d (sized for 1%%)\n", fp, n);
    assert_true(fp < n / 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_positions),
        cmocka_unit_test(test_false_positive_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
