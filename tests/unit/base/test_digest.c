/* test_digest.c - SHA-256 and HMAC-SHA256: RFC 4231's vectors, through
 * the contexts each thread keeps per key. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "digest.h"
#include "util.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static void hmac_hex(const char *key, size_t key_len, const char *data, char out[65])
{
    unsigned char mac[SHA256_BYTES];
    hmac_sha256(key, key_len, data, strlen(data), mac);
    hex_encode(mac, sizeof mac, out);
}

/* RFC 4231 test case 2, and case 1's key of twenty 0x0b bytes. */
#define JEFE_MAC  "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
#define CASE1_MAC "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"

static void *hmac_on_a_thread(void *arg)
{
    char got[65];
    hmac_hex("Jefe", 4, "what do ya want for nothing?", got);
    snprintf(arg, 65, "%s", got);
    return NULL;
}

static void test_hmac_sha256(void **state)
{
    (void)state;
    char got[65], key1[20], name[16];
    memset(key1, 0x0b, sizeof key1);
    /* The same key again starts from the kept context, not from the last
     * message: the answer is the same each time. */
    for (int i = 0; i < 3; i++) {
        hmac_hex("Jefe", 4, "what do ya want for nothing?", got);
        assert_string_equal(got, JEFE_MAC);
        hmac_hex(key1, sizeof key1, "Hi There", got);
        assert_string_equal(got, CASE1_MAC);
    }
    /* More keys than a thread keeps: each new one takes a slot, and the
     * first two, pushed out, are keyed again and still right. */
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "key-%d", i);
        hmac_hex(name, strlen(name), "x", got);
        assert_int_equal(strlen(got), 64);
    }
    hmac_hex("Jefe", 4, "what do ya want for nothing?", got);
    assert_string_equal(got, JEFE_MAC);
    hmac_hex(key1, sizeof key1, "Hi There", got);
    assert_string_equal(got, CASE1_MAC);

    /* A key longer than a block is hashed first (RFC 2104): a key too long
     * to keep gives what its SHA-256 as the key gives. */
    char long_key[300], want[65];
    unsigned char digest[SHA256_BYTES];
    memset(long_key, 0xaa, sizeof long_key);
    sha256(long_key, sizeof long_key, digest);
    hmac_hex(long_key, sizeof long_key, "data", got);
    hmac_hex((const char *)digest, sizeof digest, "data", want);
    assert_string_equal(got, want);

    /* An empty key is a key (of zeros), not an error. */
    hmac_hex("", 0, "data", got);
    assert_int_equal(strlen(got), 64);

    /* Another thread keys its own context (freed when it ends). */
    pthread_t t;
    char theirs[65] = "";
    assert_int_equal(pthread_create(&t, NULL, hmac_on_a_thread, theirs), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_string_equal(theirs, JEFE_MAC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hmac_sha256),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
