/* test_respcache.c - the in-process response cache: copies in and out,
 * expiry, the capacity bound with the oldest entries evicted first, the
 * NULL (disabled) cache, and concurrent use from many threads. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "respcache.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char FP_A[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char FP_B[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

static void put(struct respcache *c, int64_t user, const char *key, const char *body,
                int64_t expires_ms)
{
    respcache_put(c, user, key, FP_A, 201, body, strlen(body), 0, expires_ms);
}

static bool has(struct respcache *c, int64_t user, const char *key)
{
    struct cached_response r;
    bool hit = respcache_get(c, user, key, 0, &r);
    free(r.body);
    return hit;
}

static void test_disabled_cache(void **state)
{
    (void)state;
    /* Capacity 0 is "off": no cache, and every call accepts that. */
    struct respcache *c = respcache_new(0);
    assert_null(c);
    respcache_put(c, 1, "k", FP_A, 201, "{}", 2, 0, 1000);
    struct cached_response r;
    memset(&r, 'x', sizeof r);
    assert_false(respcache_get(c, 1, "k", 0, &r));
    assert_null(r.body);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.fingerprint, "");
    assert_int_equal(respcache_size(c), 0);
    respcache_free(c);
}

static void test_put_get_copies(void **state)
{
    (void)state;
    struct respcache *c = respcache_new(64);
    char body[] = "{\"order_no\":\"26120100000000000001\"}";
    respcache_put(c, 42, "key-1", FP_B, 201, body, strlen(body), 0, 10000);
    assert_int_equal(respcache_size(c), 1);

    /* The cache holds its own copy of what was put. */
    body[2] = 'X';
    struct cached_response r;
    assert_true(respcache_get(c, 42, "key-1", 0, &r));
    assert_string_equal(r.fingerprint, FP_B);
    assert_int_equal(r.status, 201);
    assert_int_equal(r.body_len, strlen(body));
    assert_string_equal(r.body, "{\"order_no\":\"26120100000000000001\"}");

    /* And hands out a new copy each time: changing one changes nothing. */
    r.body[0] = '!';
    free(r.body);
    assert_true(respcache_get(c, 42, "key-1", 0, &r));
    assert_int_equal(r.body[0], '{');
    free(r.body);

    /* Only body_len bytes are kept. */
    respcache_put(c, 42, "key-2", FP_A, 200, "abcdef", 3, 0, 10000);
    assert_true(respcache_get(c, 42, "key-2", 0, &r));
    assert_int_equal(r.body_len, 3);
    assert_string_equal(r.body, "abc");
    assert_int_equal(r.status, 200);
    free(r.body);

    /* Entries are per user and per exact key. */
    assert_false(has(c, 43, "key-1"));
    assert_false(has(c, -42, "key-1"));
    assert_false(has(c, 42, "key-"));
    assert_false(has(c, 42, "key-10"));
    assert_false(has(c, 42, "KEY-1"));
    respcache_free(c);
}

static void test_first_put_wins(void **state)
{
    (void)state;
    /* Two replays of one completed request may both store it; the second
     * must not replace (or duplicate) the first. */
    struct respcache *c = respcache_new(64);
    put(c, 1, "k", "first", 10000);
    put(c, 1, "k", "second", 10000);
    assert_int_equal(respcache_size(c), 1);
    struct cached_response r;
    assert_true(respcache_get(c, 1, "k", 0, &r));
    assert_string_equal(r.body, "first");
    free(r.body);
    respcache_free(c);
}

static void test_expired_entry_is_refreshed(void **state)
{
    (void)state;
    /* A key whose entry expired gets the new response, in the same slot. */
    struct respcache *c = respcache_new(64);
    put(c, 1, "k", "old", 1000);
    respcache_put(c, 1, "k", FP_B, 201, "new", 3, 2000, 100000);
    assert_int_equal(respcache_size(c), 1);
    struct cached_response r;
    assert_true(respcache_get(c, 1, "k", 2000, &r));
    assert_string_equal(r.body, "new");
    assert_string_equal(r.fingerprint, FP_B);
    free(r.body);
    respcache_free(c);
}

static void test_expiry(void **state)
{
    (void)state;
    struct respcache *c = respcache_new(64);
    put(c, 1, "k", "{}", 1000);
    struct cached_response r;
    assert_true(respcache_get(c, 1, "k", 999, &r));
    free(r.body);
    /* Valid until expires_ms, exclusive. */
    assert_false(respcache_get(c, 1, "k", 1000, &r));
    assert_null(r.body);
    assert_false(respcache_get(c, 1, "k", 5000, &r));
    respcache_free(c);
}

static void test_capacity_bound(void **state)
{
    (void)state;
    enum { CAP = 64, N = 640 };
    char key[32];
    struct respcache *c = respcache_new(CAP);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        put(c, 7, key, key, 1000000);
        assert_true(respcache_size(c) <= CAP);
        /* What was just stored is always there. */
        assert_true(has(c, 7, key));
    }
    assert_int_equal(respcache_size(c), CAP);

    int present = 0;
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        bool h = has(c, 7, key);
        present += h;
        /* The oldest half is long gone... */
        if (i < N / 2 && h)
            fail_msg("%s (old) is still cached", key);
        /* ...and the newest few are all there. */
        if (i >= N - 4 && !h)
            fail_msg("%s (new) was evicted", key);
    }
    assert_int_equal(present, CAP);
    respcache_free(c);
}

/* A full cache keeps its chains short: each shard has two buckets per
 * entry, and every bucket must be in use. With the shard and the bucket
 * both taken from the hash's low bits, only one bucket in 16 was, and a
 * full cache's longest chain was over 16 entries. */
static void test_chains_stay_short(void **state)
{
    (void)state;
    enum { CAP = 4096 };
    char key[48];
    struct respcache *c = respcache_new(CAP);
    for (int i = 0; i < CAP; i++) {
        snprintf(key, sizeof key, "order-key-%d", i);
        put(c, 1000 + i % 97, key, key, 1000000);
    }
    assert_true(respcache_size(c) > CAP * 9 / 10); /* the shards fill unevenly */
    size_t longest = respcache_longest_chain(c);
    if (longest > 8)
        fail_msg("a lookup may walk %zu entries in a table sized for about one", longest);
    respcache_free(c);
}

/* Whether storing b evicts a from a cache that holds one entry per slot:
 * then a and b compete for the same room. Uses only the public calls. */
static bool evicts(const char *a, const char *b)
{
    struct respcache *c = respcache_new(16);
    put(c, 1, a, a, 1000000);
    put(c, 1, b, b, 1000000);
    bool gone = !has(c, 1, a);
    respcache_free(c);
    return gone;
}

static void find_rival(const char *of, const char * not, char *out, size_t cap)
{
    for (int i = 0; i < 100000; i++) {
        snprintf(out, cap, "rival-%d", i);
        if (strcmp(out, of) != 0 && (not == NULL || strcmp(out, not ) != 0) && evicts(of, out))
            return;
    }
    fail_msg("no key competes with %s for room; did the eviction scheme change?", of);
}

static void test_oldest_is_evicted_first(void **state)
{
    (void)state;
    /* Three keys that compete for the same room... */
    char b[32], c3[32];
    find_rival("a", NULL, b, sizeof b);
    find_rival("a", b, c3, sizeof c3);

    /* ...in a cache with room for two of them: the third put evicts the
     * oldest, not the newest and not a random one. */
    struct respcache *c = respcache_new(32);
    put(c, 1, "a", "a", 1000000);
    put(c, 1, b, b, 1000000);
    assert_true(has(c, 1, "a"));
    assert_true(has(c, 1, b));
    put(c, 1, c3, c3, 1000000);
    assert_false(has(c, 1, "a"));
    assert_true(has(c, 1, b));
    assert_true(has(c, 1, c3));
    /* b was just read, yet it is now the oldest and goes next: eviction is
     * by age of storing, not of use. */
    put(c, 1, "a", "a", 1000000);
    assert_false(has(c, 1, b));
    assert_true(has(c, 1, c3));
    assert_true(has(c, 1, "a"));
    respcache_free(c);
}

enum { THREADS = 8, OPS = 4000, KEYS = 300 };

struct worker {
    struct respcache *c;
    unsigned seed;
    int hits;
    int bad; /* entries read back wrong; checked by the main thread */
};

/* The body of each (user, key) is derived from it, so a reader can tell a
 * torn or mixed-up entry from a good one. */
static void *hammer(void *arg)
{
    struct worker *w = arg;
    char key[32], body[64];
    for (int i = 0; i < OPS; i++) {
        int k = (int)(rand_r(&w->seed) % KEYS);
        int64_t user = 1 + k % 5;
        snprintf(key, sizeof key, "k%d", k);
        snprintf(body, sizeof body, "body of %lld/%s", (long long)user, key);
        if (rand_r(&w->seed) % 2 == 0) {
            respcache_put(w->c, user, key, FP_A, 201, body, strlen(body), 0, 1000000);
        } else {
            struct cached_response r;
            if (respcache_get(w->c, user, key, 0, &r)) {
                w->hits++;
                if (strcmp(r.body, body) != 0 || strcmp(r.fingerprint, FP_A) != 0 ||
                    r.status != 201)
                    w->bad++;
                free(r.body);
            }
        }
        if (i % 512 == 0)
            (void)respcache_size(w->c);
    }
    return NULL;
}

static void test_concurrent_put_get(void **state)
{
    (void)state;
    /* Smaller than the key space, so eviction runs concurrently too. */
    struct respcache *c = respcache_new(128);
    pthread_t t[THREADS];
    struct worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){c, (unsigned)(i + 1) * 7919u, 0, 0};
        assert_int_equal(pthread_create(&t[i], NULL, hammer, &w[i]), 0);
    }
    int hits = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        hits += w[i].hits;
        assert_int_equal(w[i].bad, 0);
    }
    assert_true(hits > 0);
    assert_true(respcache_size(c) <= 128);
    respcache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disabled_cache),
        cmocka_unit_test(test_put_get_copies),
        cmocka_unit_test(test_first_put_wins),
        cmocka_unit_test(test_expiry),
        cmocka_unit_test(test_capacity_bound),
        cmocka_unit_test(test_chains_stay_short),
        cmocka_unit_test(test_oldest_is_evicted_first),
        cmocka_unit_test(test_concurrent_put_get),
        cmocka_unit_test(test_expired_entry_is_refreshed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
