/* test_redis_fold.c - the arguments of a fold (redis_fold.c): every
 * call's keys in turn, then the number of calls, each call's counts of
 * keys and arguments, every call's arguments in turn; EVALSHA of the
 * fold's SHA, or EVAL of its source after NOSCRIPT; and a turn's queue of
 * calls, taken out a script at a time. What the fold's Lua
 * does with them runs against a real Redis (itest_bloom). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "redis.h"
#include "redis_conn.h"

#include <stdlib.h>
#include <string.h>

static struct redis_script fold = {"-- the fold", "", NULL};
static struct redis_script script = {"-- the script", "", &fold};
static struct redis_script other_fold = {"-- the other's fold", "", NULL};
static struct redis_script other = {"-- another script", "", &other_fold};

/* An EVALSHA (or EVAL) of script with the keys and arguments given. */
static void call(struct redis_cmd *c, const char **argv, int argc, int nkeys)
{
    assert_true(redis_cmd_set(c, argc, argv, NULL));
    c->script = &script;
    c->nkeys = nkeys;
}

static void want(const char **argv, const size_t *lens, int i, const char *s)
{
    assert_int_equal(lens[i], strlen(s));
    assert_memory_equal(argv[i], s, lens[i]);
}

static void test_keys_then_counts_then_arguments(void **state)
{
    (void)state;
    redis_script_prepare(&script);
    const char *a[] = {"EVALSHA", script.sha, "2", "k1", "k2", "x", "y", "z"};
    const char *b[] = {"EVALSHA", script.sha, "1", "k3", ""};
    const char *c[] = {"EVALSHA", script.sha, "0"};
    struct redis_cmd ca, cb, cc;
    call(&ca, a, 8, 2);
    call(&cb, b, 5, 1);
    call(&cc, c, 3, 0);
    struct redis_cmd *cmds[] = {&ca, &cb, &cc};
    const char **argv;
    size_t *lens;
    char *text;
    int argc = redis_fold_argv(cmds, 3, &argv, &lens, &text);
    const char *expect[] = {"EVALSHA", fold.sha, "3", "k1", "k2", "k3", "3", "2", "3",
                            "1",       "1",      "0", "0",  "x",  "y",  "z", ""};
    assert_int_equal(argc, (int)(sizeof expect / sizeof expect[0]));
    assert_int_equal(strlen(fold.sha), 40);
    assert_string_not_equal(fold.sha, script.sha);
    for (int i = 0; i < argc; i++)
        want(argv, lens, i, expect[i]);
    free(argv);
    free(lens);
    free(text);
}

/* After NOSCRIPT a call is sent again by EVAL with its source: the fold
 * then carries its own source, which Redis caches for the next turn. */
static void test_eval_carries_the_folds_source(void **state)
{
    (void)state;
    redis_script_prepare(&script);
    const char *a[] = {"EVAL", script.source, "1", "k", "v"};
    struct redis_cmd ca, cb;
    call(&ca, a, 5, 1);
    call(&cb, a, 5, 1);
    struct redis_cmd *cmds[] = {&ca, &cb};
    const char **argv;
    size_t *lens;
    char *text;
    int argc = redis_fold_argv(cmds, 2, &argv, &lens, &text);
    const char *expect[] = {"EVAL", fold.source, "2", "k", "k", "2", "1", "1", "1", "1", "v", "v"};
    assert_int_equal(argc, (int)(sizeof expect / sizeof expect[0]));
    for (int i = 0; i < argc; i++)
        want(argv, lens, i, expect[i]);
    free(argv);
    free(lens);
    free(text);
}

/* Arguments are carried by their lengths: a byte string with a NUL in it
 * crosses whole. */
static void test_binary_arguments_keep_their_length(void **state)
{
    (void)state;
    redis_script_prepare(&script);
    static const char bin[] = {'a', '\0', 'b'};
    const char *a[] = {"EVALSHA", script.sha, "0", bin};
    const size_t la[] = {7, 40, 1, sizeof bin};
    struct redis_cmd ca, cb;
    assert_true(redis_cmd_set(&ca, 4, a, la));
    ca.script = &script;
    ca.nkeys = 0;
    cb = ca;
    struct redis_cmd *cmds[] = {&ca, &cb};
    const char **argv;
    size_t *lens;
    char *text;
    int argc = redis_fold_argv(cmds, 2, &argv, &lens, &text);
    assert_int_equal(argc, 3 + 0 + 1 + 4 + 2);
    for (int i = 8; i < 10; i++) {
        assert_int_equal(lens[i], sizeof bin);
        assert_memory_equal(argv[i], bin, sizeof bin);
    }
    free(argv);
    free(lens);
    free(text);
}

/* A turn's queue is taken out a script (and verb) at a time, each group
 * in the order its calls came, the rest left in theirs; a group holds at
 * most max calls. */
static void test_the_queue_goes_out_by_script(void **state)
{
    (void)state;
    const char *sha[] = {"EVALSHA", "x", "0"};
    const char *src[] = {"EVAL", "x", "0"};
    struct redis_cmd c[7];
    /* a b A a b a b, where A is an EVAL of a's script (after NOSCRIPT). */
    const struct redis_script *of[] = {&script, &other, &script, &script, &other, &script, &other};
    struct redis_fold_queue q = {0};
    for (int i = 0; i < 7; i++) {
        assert_true(redis_cmd_set(&c[i], 3, i == 2 ? src : sha, NULL));
        c[i].script = of[i];
        redis_fold_push(&q, &c[i]);
    }
    struct redis_cmd *g[8];
    assert_int_equal(redis_fold_take(&q, g, 2), 2);
    assert_ptr_equal(g[0], &c[0]);
    assert_ptr_equal(g[1], &c[3]);
    assert_int_equal(redis_fold_take(&q, g, 8), 3);
    assert_ptr_equal(g[0], &c[1]);
    assert_ptr_equal(g[1], &c[4]);
    assert_ptr_equal(g[2], &c[6]);
    assert_int_equal(redis_fold_take(&q, g, 8), 1);
    assert_ptr_equal(g[0], &c[2]);
    assert_int_equal(redis_fold_take(&q, g, 8), 1);
    assert_ptr_equal(g[0], &c[5]);
    assert_int_equal(redis_fold_take(&q, g, 8), 0);
    assert_null(q.head);
    assert_null(q.tail);
    /* Pushed again after being emptied: the tail was kept right. */
    redis_fold_push(&q, &c[0]);
    assert_int_equal(redis_fold_take(&q, g, 8), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_then_counts_then_arguments),
        cmocka_unit_test(test_eval_carries_the_folds_source),
        cmocka_unit_test(test_binary_arguments_keep_their_length),
        cmocka_unit_test(test_the_queue_goes_out_by_script),
    };
    return cmocka_run_group_tests_name("redis_fold", tests, NULL, NULL);
}
