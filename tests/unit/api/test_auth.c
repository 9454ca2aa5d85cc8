/* test_auth.c - bearer token verification. Tokens are built by hand here
 * (base64url + HMAC), not with the library under test, so that headers,
 * algorithms and claims the issuer would never produce can be tried. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "auth.h"
#include "err.h"
#include "digest.h"
#include "util.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define SECRET "unit-test-secret-0123456789abcdef0123"
#define NOW    ((int64_t)1800000000)
/* As JSON numbers, relative to NOW. */
#define PAST   "1799999999"
#define AT_NOW "1800000000"
#define SOON   "1800000001"
#define FUTURE "1800003600"

#define HS256 "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"

static char *b64(const char *s, size_t n)
{
    char *out = xmalloc(b64url_len(n) + 1);
    b64url_encode((const unsigned char *)s, n, out);
    return out;
}

/* header.payload.signature, signed with md (NULL: no signature, as an
 * "alg: none" token has). Returns a new string. */
static char *make_token(const char *header, const char *payload, const EVP_MD *md,
                        const char *secret)
{
    char *h = b64(header, strlen(header));
    char *p = b64(payload, strlen(payload));
    char *input = xasprintf("%s.%s", h, p);
    char *sig = xstrdup("");
    if (md != NULL) {
        unsigned char mac[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        HMAC(md, secret, (int)strlen(secret), (const unsigned char *)input, strlen(input), mac, &n);
        free(sig);
        sig = b64((const char *)mac, n);
    }
    char *token = xasprintf("%s.%s", input, sig);
    free(h);
    free(p);
    free(input);
    free(sig);
    return token;
}

/* "Bearer <token>" for a HS256 token with the right secret. */
static char *bearer(const char *payload)
{
    char *t = make_token(HS256, payload, EVP_sha256(), SECRET);
    char *h = xasprintf("Bearer %s", t);
    free(t);
    return h;
}

struct claim_case {
    const char *payload;
    int want;
    int64_t user_id;
    bool admin;
};

static const struct claim_case claim_cases[] = {
    /* Users and admins. */
    {"{\"sub\":\"42\",\"exp\":" FUTURE "}", TD_OK, 42, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"role\":\"admin\"}", TD_OK, 42, true},
    {"{\"sub\":\"7\",\"exp\":" FUTURE ",\"role\":\"Admin\"}", TD_OK, 7, false},
    {"{\"sub\":\"7\",\"exp\":" FUTURE ",\"role\":\"user\"}", TD_OK, 7, false},
    {"{\"sub\":\"7\",\"exp\":" FUTURE ",\"role\":1}", TD_OK, 7, false},
    {"{\"sub\":\"7\",\"exp\":" FUTURE ",\"role\":[\"admin\"]}", TD_OK, 7, false},

    /* exp: a number, strictly in the future. */
    {"{\"sub\":\"42\",\"exp\":" PAST "}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" AT_NOW "}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" SOON "}", TD_OK, 42, false},
    {"{\"sub\":\"42\"}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":\"" FUTURE "\"}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ".0}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":null}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":true}", TD_EINVAL, 0, false},

    {"{\"sub\":\"42\",\"exp\":[" FUTURE "]}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE "e0}", TD_EINVAL, 0, false},

    /* nbf: if present, an integer not in the future. */
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"nbf\":" SOON "}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"nbf\":" AT_NOW "}", TD_OK, 42, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"nbf\":" PAST "}", TD_OK, 42, false},
    /* Another type is refused, never skipped as if absent: a future nbf
     * written as a string or a real is still a future nbf. */
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"nbf\":\"" FUTURE "\"}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"nbf\":" FUTURE ".0}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"nbf\":" FUTURE ".5}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"nbf\":1.8000036e9}", TD_EINVAL, 0, false},
    /* ... and so is one in the past: the type is wrong whatever the value. */
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"nbf\":\"" PAST "\"}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"nbf\":" PAST ".0}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"nbf\":null}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"nbf\":true}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"nbf\":[" PAST "]}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"nbf\":{}}", TD_EINVAL, 0, false},

    /* iat: if present, an integer (its value is not checked). */
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"iat\":" PAST "}", TD_OK, 42, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"iat\":" FUTURE "}", TD_OK, 42, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"iat\":\"" PAST "\"}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"iat\":" PAST ".0}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"iat\":null}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE ",\"iat\":\"\"}", TD_EINVAL, 0, false},

    /* sub: a decimal string of 1..2^53-1, canonical. */
    {"{\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    {"{\"sub\":42,\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    {"{\"sub\":\"\",\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    {"{\"sub\":\"0\",\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    {"{\"sub\":\"042\",\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    {"{\"sub\":\"-1\",\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    {"{\"sub\":\"+1\",\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    {"{\"sub\":\" 1\",\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    {"{\"sub\":\"1 \",\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    {"{\"sub\":\"1e3\",\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    {"{\"sub\":\"user42\",\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    {"{\"sub\":\"1\",\"exp\":" FUTURE "}", TD_OK, 1, false},
    {"{\"sub\":\"9007199254740991\",\"exp\":" FUTURE "}", TD_OK, AUTH_MAX_USER_ID, false},
    {"{\"sub\":\"9007199254740992\",\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    {"{\"sub\":\"99999999999999999999999\",\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    /* A NUL inside the string would end it early: "12\u00003" is not 12. */
    {"{\"sub\":\"12\\u00003\",\"exp\":" FUTURE "}", TD_EINVAL, 0, false},

    /* A claim given twice: which one would count? Refused. */
    {"{\"sub\":\"42\",\"sub\":\"1\",\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" PAST ",\"exp\":" FUTURE "}", TD_EINVAL, 0, false},
    /* The claims are a JSON object, nothing else. */
    {"[\"sub\",\"42\"]", TD_EINVAL, 0, false},
    {"\"42\"", TD_EINVAL, 0, false},
    {"{\"sub\":\"42\",\"exp\":" FUTURE "} trailing", TD_EINVAL, 0, false},
};

static void test_claims_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof claim_cases / sizeof claim_cases[0]; i++) {
        const struct claim_case *c = &claim_cases[i];
        char *h = bearer(c->payload);
        struct identity who = {-1, true};
        int rc = auth_verify(h, SECRET, NOW, &who);
        if (rc != c->want)
            fail_msg("%s: rc %d, want %d", c->payload, rc, c->want);
        /* On failure the identity is cleared, not half-filled. */
        assert_int_equal(who.user_id, c->user_id);
        if (who.admin != c->admin)
            fail_msg("%s: admin %d, want %d", c->payload, who.admin, c->admin);
        free(h);
    }
}

static void expect_refused(const char *header)
{
    struct identity who = {-1, true};
    if (auth_verify(header, SECRET, NOW, &who) != TD_EINVAL)
        fail_msg("accepted: %.80s", header ? header : "(null)");
    assert_int_equal(who.user_id, 0);
    assert_false(who.admin);
}

/* A token of that header and payload, signed with md and secret (md
 * NULL: no signature), must be refused. */
static void expect_token_refused(const char *header, const char *payload, const EVP_MD *md,
                                 const char *secret)
{
    char *t = make_token(header, payload, md, secret);
    char *h = xasprintf("Bearer %s", t);
    expect_refused(h);
    free(t);
    free(h);
}

/* RFC 7515 4.1.11: "crit" names extensions the reader must understand, and
 * ticketd understands none: correctly signed, each is refused, while the
 * same header without "crit" (and with another unknown, non-critical
 * parameter) is accepted. */
static void test_critical_extensions(void **state)
{
    (void)state;
    static const char payload[] = "{\"sub\":\"42\",\"exp\":" FUTURE "}";
    static const char *const headers[] = {
        "{\"alg\":\"HS256\",\"crit\":[\"exp\"],\"exp\":1900000000}",
        "{\"alg\":\"HS256\",\"crit\":[\"b64\"],\"b64\":false}",
        "{\"alg\":\"HS256\",\"crit\":[\"http://example.com/x\"]}",
        "{\"alg\":\"HS256\",\"crit\":[]}",
        "{\"alg\":\"HS256\",\"crit\":\"b64\"}",
        "{\"alg\":\"HS256\",\"crit\":null}",
    };
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++)
        expect_token_refused(headers[i], payload, EVP_sha256(), SECRET);

    struct identity who;
    char *t = make_token("{\"alg\":\"HS256\",\"kid\":\"k1\",\"x-note\":1}", payload, EVP_sha256(),
                         SECRET);
    char *h = xasprintf("Bearer %s", t);
    assert_int_equal(auth_verify(h, SECRET, NOW, &who), TD_OK);
    assert_int_equal(who.user_id, 42);
    free(t);
    free(h);
}

static void test_signature_and_algorithm(void **state)
{
    (void)state;
    static const char payload[] = "{\"sub\":\"42\",\"exp\":" FUTURE ",\"role\":\"admin\"}";

    /* The wrong secret. */
    expect_token_refused(HS256, payload, EVP_sha256(), "another-secret-0123456789abcdef0123");

    /* "alg": "none" with no signature: the oldest JWT attack. */
    expect_token_refused("{\"alg\":\"none\",\"typ\":\"JWT\"}", payload, NULL, SECRET);
    expect_token_refused("{\"alg\":\"none\"}", payload, NULL, SECRET);

    /* A correct HMAC, but with another hash than the one we issue: the
     * server's key decides the algorithm, never the token. */
    expect_token_refused("{\"alg\":\"HS512\",\"typ\":\"JWT\"}", payload, EVP_sha512(), SECRET);
    expect_token_refused("{\"alg\":\"HS384\",\"typ\":\"JWT\"}", payload, EVP_sha384(), SECRET);

    /* An HS256 header over an HS512 signature. */
    expect_token_refused(HS256, payload, EVP_sha512(), SECRET);

    /* A signature stripped off an HS256 token. */
    expect_token_refused(HS256, payload, NULL, SECRET);

    /* Headers that are not one plain {"alg":"HS256"}, correctly signed. */
    static const char *const headers[] = {
        "{\"alg\":\"HS256\",\"alg\":\"none\"}",
        "{\"alg\":[\"HS256\"]}",
        "[\"HS256\"]",
        "{\"typ\":\"JWT\"}",
        "{\"alg\":\"hs256\"}",
        "{\"alg\":\"HS256\\u0000\"}",
    };
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++)
        expect_token_refused(headers[i], payload, EVP_sha256(), SECRET);

    /* The same signature spelled another way: 32 bytes leave two unused
     * bits in the last base64url character, and only zeros are canonical. */
    char *t = make_token(HS256, payload, EVP_sha256(), SECRET);
    char *h = xasprintf("Bearer %s", t);
    struct identity who;
    assert_int_equal(auth_verify(h, SECRET, NOW, &who), TD_OK);
    char *last = h + strlen(h) - 1;
    const char *tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    *last = tab[(strchr(tab, *last) - tab) | 1];
    expect_refused(h);
    free(t);
    free(h);
}

static void test_tampered_payload(void **state)
{
    (void)state;
    char *good = make_token(HS256, "{\"sub\":\"42\",\"exp\":" FUTURE "}", EVP_sha256(), SECRET);
    char *evil = make_token(HS256, "{\"sub\":\"1\",\"exp\":" FUTURE ",\"role\":\"admin\"}",
                            EVP_sha256(), "not-the-secret");
    /* Take the payload of evil and the header and signature of good. */
    char *g1 = strchr(good, '.'), *g2 = strrchr(good, '.');
    char *e1 = strchr(evil, '.'), *e2 = strrchr(evil, '.');
    char *h = xasprintf("Bearer %.*s%.*s%s", (int)(g1 - good), good, (int)(e2 - e1), e1, g2);
    expect_refused(h);
    free(h);

    /* One flipped character of the signature is enough to refuse. */
    size_t n = strlen(good);
    good[n - 2] = good[n - 2] == 'A' ? 'B' : 'A';
    h = xasprintf("Bearer %s", good);
    expect_refused(h);
    free(h);
    free(good);
    free(evil);
}

static void test_header_shapes(void **state)
{
    (void)state;
    static const char payload[] = "{\"sub\":\"42\",\"exp\":" FUTURE "}";
    char *t = make_token(HS256, payload, EVP_sha256(), SECRET);
    struct identity who;
    char *h;

    expect_refused(NULL);
    expect_refused("");
    expect_refused("Bearer");
    expect_refused("Bearer ");
    expect_refused("Bearer    ");
    expect_refused("Bearer abc");
    expect_refused("Bearer a.b.c");
    expect_refused("Bearer ..");
    expect_refused("Basic dXNlcjpwYXNz");
    h = xasprintf("Basic %s", t);
    expect_refused(h);
    free(h);
    /* The bare token without a scheme. */
    expect_refused(t);
    h = xasprintf("Token %s", t);
    expect_refused(h);
    free(h);

    /* The scheme is case-insensitive (RFC 9110 11.1); extra spaces before
     * the token are tolerated. */
    h = xasprintf("bearer %s", t);
    assert_int_equal(auth_verify(h, SECRET, NOW, &who), TD_OK);
    assert_int_equal(who.user_id, 42);
    free(h);
    h = xasprintf("BEARER  %s", t);
    assert_int_equal(auth_verify(h, SECRET, NOW, &who), TD_OK);
    free(h);
    free(t);
}

static void test_overlong_token(void **state)
{
    (void)state;
    /* A valid signature does not buy parsing of a huge token. */
    char pad[4000];
    memset(pad, 'a', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    char *payload = xasprintf("{\"sub\":\"42\",\"exp\":" FUTURE ",\"pad\":\"%s\"}", pad);
    char *h = bearer(payload);
    assert_true(strlen(h) > 4096 + 7);
    expect_refused(h);
    free(h);
    free(payload);

    /* A long token under the limit is fine: the length is the reason above. */
    pad[2000] = '\0';
    payload = xasprintf("{\"sub\":\"42\",\"exp\":" FUTURE ",\"pad\":\"%s\"}", pad);
    h = bearer(payload);
    struct identity who;
    assert_int_equal(auth_verify(h, SECRET, NOW, &who), TD_OK);
    assert_int_equal(who.user_id, 42);
    free(h);
    free(payload);
}

/* A verified token is remembered per thread: the memory must never widen
 * what verification allows. */
static void test_remembered_tokens(void **state)
{
    (void)state;
    struct identity who;
    char *h = bearer("{\"sub\":\"77\",\"exp\":" SOON "}");
    assert_int_equal(auth_verify(h, SECRET, NOW, &who), TD_OK);
    assert_int_equal(who.user_id, 77);
    /* Again: the same answer. */
    assert_int_equal(auth_verify(h, SECRET, NOW, &who), TD_OK);
    assert_int_equal(who.user_id, 77);
    /* Under another secret it is a different token. */
    assert_int_equal(auth_verify(h, "another-secret-0123456789abcdef0123456", NOW, &who),
                     TD_EINVAL);
    /* Expiry is checked on every use, remembered or not. */
    assert_int_equal(auth_verify(h, SECRET, NOW + 1, &who), TD_EINVAL);
    assert_int_equal(who.user_id, 0);
    free(h);
}

/* The header accepted last is not parsed again: a token with that header
 * passes on its own claims, and a header that differs by a byte is read
 * and judged afresh. */
static void test_kept_header(void **state)
{
    (void)state;
    struct identity who;
    char *first = bearer("{\"sub\":\"5\",\"exp\":" FUTURE "}");
    char *second = bearer("{\"sub\":\"6\",\"exp\":" FUTURE "}");
    char *late = bearer("{\"sub\":\"7\",\"exp\":1}");
    assert_int_equal(auth_verify(first, SECRET, NOW, &who), TD_OK);
    assert_int_equal(auth_verify(second, SECRET, NOW, &who), TD_OK);
    assert_int_equal(who.user_id, 6);
    /* The same header, claims that fail: refused. */
    assert_int_equal(auth_verify(late, SECRET, NOW, &who), TD_EINVAL);
    static const char payload[] = "{\"sub\":\"42\",\"exp\":" FUTURE "}";
    expect_token_refused("{\"alg\":\"HS256\",\"crit\":[\"b64\"],\"b64\":false}", payload,
                         EVP_sha256(), SECRET);
    expect_token_refused("{\"alg\":\"HS384\"}", payload, EVP_sha256(), SECRET);
    /* The one kept is still good after them. */
    char *third = bearer("{\"sub\":\"8\",\"exp\":" FUTURE "}");
    assert_int_equal(auth_verify(third, SECRET, NOW, &who), TD_OK);
    assert_int_equal(who.user_id, 8);
    free(first);
    free(second);
    free(late);
    free(third);
}

static void test_issue_round_trip(void **state)
{
    (void)state;
    struct identity who;
    char *t = auth_issue(SECRET, 42, false, NOW, 3600);
    assert_non_null(t);
    /* Three base64url parts. */
    assert_int_equal(strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."),
                     strlen(t));
    char *h = xasprintf("Bearer %s", t);
    assert_int_equal(auth_verify(h, SECRET, NOW, &who), TD_OK);
    assert_int_equal(who.user_id, 42);
    assert_false(who.admin);
    /* Valid until just before now + ttl. */
    assert_int_equal(auth_verify(h, SECRET, NOW + 3599, &who), TD_OK);
    assert_int_equal(auth_verify(h, SECRET, NOW + 3600, &who), TD_EINVAL);
    /* Another secret does not accept it. */
    assert_int_equal(auth_verify(h, "another-secret-0123456789abcdef0123", NOW, &who), TD_EINVAL);
    free(h);
    free(t);

    t = auth_issue(SECRET, AUTH_MAX_USER_ID, true, NOW, 60);
    assert_non_null(t);
    h = xasprintf("Bearer %s", t);
    assert_int_equal(auth_verify(h, SECRET, NOW, &who), TD_OK);
    assert_int_equal(who.user_id, AUTH_MAX_USER_ID);
    assert_true(who.admin);
    free(h);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claims_table),      cmocka_unit_test(test_signature_and_algorithm),
        cmocka_unit_test(test_tampered_payload),  cmocka_unit_test(test_header_shapes),
        cmocka_unit_test(test_overlong_token),    cmocka_unit_test(test_issue_round_trip),
        cmocka_unit_test(test_remembered_tokens), cmocka_unit_test(test_critical_extensions),
        cmocka_unit_test(test_kept_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
