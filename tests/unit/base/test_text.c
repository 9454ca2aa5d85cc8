/* test_text.c - the growing text: pieces appended in order, the buffer
 * grown past its first size, and a piece longer than twice the buffer put
 * whole in one step; bytes put as they are (text_putn) among formatted
 * pieces, NUL-terminated each time. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "text.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

static void test_pieces_in_order(void **state)
{
    (void)state;
    struct text t = {xmalloc(4), 0, 4};
    t.s[0] = '\0';
    text_put(&t, "%s", "ab");
    text_put(&t, "%d-%d", 12, 34);
    text_put(&t, "%s", "");
    assert_string_equal(t.s, "ab12-34");
    assert_int_equal(t.len, strlen("ab12-34"));
    assert_true(t.cap > t.len);
    free(t.s);
}

static void test_long_piece(void **state)
{
    (void)state;
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    struct text t = {xmalloc(8), 0, 8};
    t.s[0] = '\0';
    text_put(&t, "<%s>", big);
    assert_int_equal(t.len, sizeof big + 1);
    assert_int_equal(t.s[0], '<');
    assert_int_equal(t.s[t.len - 1], '>');
    assert_int_equal(t.s[t.len], '\0');
    assert_int_equal(strspn(t.s + 1, "x"), sizeof big - 1);
    free(t.s);
}

static void test_bytes_as_they_are(void **state)
{
    (void)state;
    struct text t = {xmalloc(2), 0, 2};
    t.s[0] = '\0';
    text_putn(&t, "%d", 2); /* not a format */
    assert_string_equal(t.s, "%d");
    text_put(&t, "[%d]", 7);
    text_putn(&t, "abcdef", 3);
    text_putn(&t, "", 0);
    assert_string_equal(t.s, "%d[7]abc");
    assert_int_equal(t.len, 8);
    char big[300];
    memset(big, 'y', sizeof big);
    text_putn(&t, big, sizeof big);
    assert_int_equal(t.len, 8 + sizeof big);
    assert_int_equal(t.s[t.len], '\0');
    assert_true(t.cap > t.len);
    free(t.s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pieces_in_order),
        cmocka_unit_test(test_long_piece),
        cmocka_unit_test(test_bytes_as_they_are),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
