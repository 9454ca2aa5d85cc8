/* test_body.c - the bounded request body buffer: a client controls at most
 * `max` bytes of our memory, and a refused append changes nothing. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "body.h"
#include "err.h"

#include <stdlib.h>
#include <string.h>

static void test_init_is_empty(void **state)
{
    (void)state;
    struct body b;
    body_init(&b, 100);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    assert_int_equal(b.max, 100);
    body_cleanup(&b);
}

static void test_exactly_max_fits(void **state)
{
    (void)state;
    char buf[1000];
    memset(buf, 'x', sizeof buf);
    struct body b;
    body_init(&b, sizeof buf);
    assert_int_equal(body_append(&b, buf, sizeof buf), TD_OK);
    assert_int_equal(b.len, sizeof buf);
    assert_memory_equal(b.data, buf, sizeof buf);
    assert_int_equal(b.data[b.len], '\0');
    /* Never more than max plus the terminator. */
    assert_true(b.cap <= b.max + 1);
    body_cleanup(&b);
}

static void test_max_plus_one_is_refused_and_changes_nothing(void **state)
{
    (void)state;
    struct body b;
    body_init(&b, 10);

    /* In one append. */
    assert_int_equal(body_append(&b, "0123456789A", 11), TD_EINVAL);
    assert_int_equal(b.len, 0);

    /* After a partial fill: the first part stays, byte for byte. */
    assert_int_equal(body_append(&b, "abcdef", 6), TD_OK);
    char *data = b.data;
    size_t cap = b.cap;
    assert_int_equal(body_append(&b, "12345", 5), TD_EINVAL);
    assert_ptr_equal(b.data, data);
    assert_int_equal(b.cap, cap);
    assert_int_equal(b.len, 6);
    assert_string_equal(b.data, "abcdef");

    /* Filling to exactly max still works, and then one byte more does not. */
    assert_int_equal(body_append(&b, "1234", 4), TD_OK);
    assert_string_equal(b.data, "abcdef1234");
    assert_int_equal(body_append(&b, "x", 1), TD_EINVAL);
    assert_int_equal(b.len, 10);
    assert_string_equal(b.data, "abcdef1234");
    body_cleanup(&b);
}

static void test_huge_length_does_not_wrap(void **state)
{
    (void)state;
    struct body b;
    body_init(&b, 64);
    assert_int_equal(body_append(&b, "abc", 3), TD_OK);
    /* len + n would wrap around size_t; the check must not. */
    assert_int_equal(body_append(&b, "x", SIZE_MAX), TD_EINVAL);
    assert_int_equal(body_append(&b, "x", SIZE_MAX - 2), TD_EINVAL);
    assert_int_equal(b.len, 3);
    assert_string_equal(b.data, "abc");
    body_cleanup(&b);
}

static void test_many_small_appends(void **state)
{
    (void)state;
    enum { MAX = 16384 };
    char *want = malloc(MAX);
    struct body b;
    body_init(&b, MAX);
    for (size_t i = 0; i < MAX; i++) {
        char c = (char)('a' + i % 26);
        want[i] = c;
        assert_int_equal(body_append(&b, &c, 1), TD_OK);
        /* Terminated after every append, not only at the end. */
        assert_int_equal(b.data[b.len], '\0');
        assert_true(b.cap >= b.len + 1);
        assert_true(b.cap <= b.max + 1);
    }
    assert_int_equal(b.len, MAX);
    assert_memory_equal(b.data, want, MAX);
    assert_int_equal(body_append(&b, "z", 1), TD_EINVAL);
    assert_int_equal(b.len, MAX);
    body_cleanup(&b);
    free(want);
}

static void test_chunks_across_growth(void **state)
{
    (void)state;
    /* Chunks of an awkward size cross every doubling of the capacity. */
    enum { MAX = 100000, CHUNK = 777 };
    char chunk[CHUNK];
    struct body b;
    body_init(&b, MAX);
    size_t total = 0;
    for (int k = 0; total + CHUNK <= MAX; k++) {
        memset(chunk, 'A' + k % 26, CHUNK);
        assert_int_equal(body_append(&b, chunk, CHUNK), TD_OK);
        total += CHUNK;
        assert_int_equal(b.data[total - 1], 'A' + k % 26);
        assert_int_equal(b.data[total - CHUNK], 'A' + k % 26);
    }
    assert_int_equal(b.len, total);
    assert_true(b.cap <= b.max + 1);
    assert_int_equal(body_append(&b, chunk, CHUNK), TD_EINVAL);
    assert_int_equal(body_append(&b, chunk, MAX - total), TD_OK);
    assert_int_equal(b.len, MAX);
    body_cleanup(&b);
}

static void test_zero_length(void **state)
{
    (void)state;
    struct body b;
    body_init(&b, 8);
    /* An empty chunk is fine and leaves an empty, terminated string. */
    assert_int_equal(body_append(&b, "", 0), TD_OK);
    assert_int_equal(b.len, 0);
    assert_non_null(b.data);
    assert_string_equal(b.data, "");
    assert_int_equal(body_append(&b, "12345678", 8), TD_OK);
    /* Even a full buffer takes an empty chunk. */
    assert_int_equal(body_append(&b, "", 0), TD_OK);
    assert_int_equal(b.len, 8);
    body_cleanup(&b);

    /* A limit of zero accepts only nothing. */
    body_init(&b, 0);
    assert_int_equal(body_append(&b, "", 0), TD_OK);
    assert_int_equal(body_append(&b, "x", 1), TD_EINVAL);
    assert_int_equal(b.len, 0);
    body_cleanup(&b);
}

static void test_binary_bytes_are_kept(void **state)
{
    (void)state;
    static const char raw[] = {'a', '\0', 'b', '\xff', '\0'};
    struct body b;
    body_init(&b, 64);
    assert_int_equal(body_append(&b, raw, sizeof raw), TD_OK);
    assert_int_equal(b.len, sizeof raw);
    assert_memory_equal(b.data, raw, sizeof raw);
    body_cleanup(&b);
}

static void test_cleanup_resets_for_reuse(void **state)
{
    (void)state;
    struct body b;
    body_init(&b, 5);
    assert_int_equal(body_append(&b, "abc", 3), TD_OK);
    body_cleanup(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    assert_int_equal(b.max, 5);
    /* The limit survives the cleanup: it is the whole budget again. */
    assert_int_equal(body_append(&b, "12345", 5), TD_OK);
    assert_int_equal(body_append(&b, "6", 1), TD_EINVAL);
    body_cleanup(&b);
    /* Cleaning up twice is harmless. */
    body_cleanup(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_is_empty),
        cmocka_unit_test(test_exactly_max_fits),
        cmocka_unit_test(test_max_plus_one_is_refused_and_changes_nothing),
        cmocka_unit_test(test_huge_length_does_not_wrap),
        cmocka_unit_test(test_many_small_appends),
        cmocka_unit_test(test_chunks_across_growth),
        cmocka_unit_test(test_zero_length),
        cmocka_unit_test(test_binary_bytes_are_kept),
        cmocka_unit_test(test_cleanup_resets_for_reuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
