/* fuzz_auth.c - the Authorization header (auth_verify): the token's shape,
 * then the signature, the decoding of the segments, then the claims.
 *
 * Each input is used twice:
 *  - as the raw header value ("Bearer <jwt>" or anything else), which
 *    almost never carries a valid signature but explores the shape checks
 *    and the decoder;
 *  - as the claims of a token the harness signs itself with the secret
 *    (HMAC-SHA256 through OpenSSL, not through libjwt or auth.c), so the
 *    claims checks are reached. If the input holds a line break, the text
 *    before it is the JOSE header instead of {"alg":"HS256","typ":"JWT"}.
 *
 * Invariants: on success the identity is a user id in 1..2^53-1; on
 * refusal it is cleared. A signed token is accepted exactly when its
 * header names HS256 and no critical extension (crit) and its claims hold a decimal `sub` in range
 * (no leading zero), an integer `exp` after now and no integer `nbf` after now; the admin flag is
 * set exactly for role "admin". The same token under another secret is refused. */
#include "fuzz.h"

#include "auth.h"
#include "err.h"
#include "util.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdbool.h>

/* The largest input worth trying, a little past the limits the parser
 * enforces (fuzz.mk reads it for -max_len). */
#define FUZZ_MAX_LEN 4400

#define SECRET "fuzz-secret-fuzz-secret-fuzz-secret!"
#define NOW    1767225600 /* 2026-01-01 */

static const char default_header[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";

static void check_identity(int rc, const struct identity *who)
{
    if (rc == TD_OK) {
        CHECK(who->user_id >= 1 && who->user_id <= AUTH_MAX_USER_ID);
    } else {
        CHECK(rc == TD_EINVAL && who->user_id == 0 && !who->admin);
    }
}

static char *b64(const void *p, size_t n)
{
    char *out = malloc(b64url_len(n) + 1);
    if (out == NULL)
        abort();
    b64url_encode(p, n, out);
    return out;
}

/* "Bearer <b64(header)>.<b64(claims)>.<b64(HMAC-SHA256(secret, the two))>" */
static char *signed_header(const char *jose, size_t jose_len, const uint8_t *claims, size_t n)
{
    char *h = b64(jose, jose_len);
    char *c = b64(claims, n);
    char *input = xasprintf("%s.%s", h, c);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), (const unsigned char *)input, strlen(input),
             mac, &mac_len) == NULL)
        abort();
    char *sig = b64(mac, mac_len);
    char *out = xasprintf("Bearer %s.%s", input, sig);
    free(sig);
    free(input);
    free(c);
    free(h);
    return out;
}

/* Whether the claims, as the contract in auth.h reads them, make a token
 * acceptable; and the identity they name. */
static bool claims_ok(const json_t *claims, struct identity *who)
{
    if (!json_is_object(claims))
        return false;
    const json_t *exp = json_object_get(claims, "exp");
    if (!json_is_integer(exp) || json_integer_value(exp) <= NOW)
        return false;
    /* nbf and iat: absent, or JSON integers (a string or a real is
     * refused, not read as 0); nbf not in the future. */
    const json_t *nbf = json_object_get(claims, "nbf");
    if (nbf != NULL && (!json_is_integer(nbf) || json_integer_value(nbf) > NOW))
        return false;
    const json_t *iat = json_object_get(claims, "iat");
    if (iat != NULL && !json_is_integer(iat))
        return false;
    const json_t *sub_v = json_object_get(claims, "sub");
    const char *sub = json_string_value(sub_v);
    if (sub == NULL || strlen(sub) != json_string_length(sub_v)) /* a NUL inside */
        return false;
    if (sub[0] < '1' || sub[0] > '9' || strlen(sub) > 16)
        return false;
    int64_t uid = 0;
    for (const char *p = sub; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return false;
        uid = uid * 10 + (*p - '0');
    }
    if (uid > AUTH_MAX_USER_ID)
        return false;
    const char *role = json_string_value(json_object_get(claims, "role"));
    who->user_id = uid;
    who->admin = role != NULL && strcmp(role, "admin") == 0;
    return true;
}

/* A decoded segment is one JSON object, all of it (a NUL byte is not
 * JSON), with no key given twice. */
static json_t *load_segment(const void *p, size_t n)
{
    json_t *v = json_loadb(p, n, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(v)) {
        json_decref(v);
        return NULL;
    }
    return v;
}

static bool header_ok(const char *jose, size_t len)
{
    json_t *h = load_segment(jose, len);
    const json_t *alg_v = json_object_get(h, "alg");
    const char *alg = json_string_value(alg_v);
    bool ok = alg != NULL && strlen(alg) == json_string_length(alg_v) && strcmp(alg, "HS256") == 0;
    /* RFC 7515 4.1.11: no critical extension is understood. */
    ok = ok && json_object_get(h, "crit") == NULL;
    json_decref(h);
    return ok;
}

static void raw(const uint8_t *data, size_t size)
{
    struct identity who;
    char *header = fz_strndup(data, size);
    int rc = auth_verify(header, SECRET, NOW, &who);
    check_identity(rc, &who);
    /* Verified twice: the second answer may come from the per-thread
     * cache of verified tokens, and must be the same. */
    struct identity again;
    CHECK(auth_verify(header, SECRET, NOW, &again) == rc);
    CHECK(again.user_id == who.user_id && again.admin == who.admin);
    free(header);
}

static void signed_claims(const uint8_t *data, size_t size)
{
    const char *jose = default_header;
    size_t jose_len = strlen(default_header);
    const uint8_t *nl = size > 0 ? memchr(data, '\n', size) : NULL;
    if (nl != NULL) {
        jose = (const char *)data;
        jose_len = (size_t)(nl - data);
        size -= jose_len + 1;
        data = nl + 1;
    }
    char *header = signed_header(jose, jose_len, data, size);

    struct identity who;
    int rc = auth_verify(header, SECRET, NOW, &who);
    check_identity(rc, &who);
    if (rc == TD_OK) {
        /* Accepted: it must be acceptable, and name who the claims name. */
        CHECK(header_ok(jose, jose_len));
        json_t *claims = load_segment(data, size);
        struct identity want = {0};
        CHECK(claims_ok(claims, &want));
        CHECK(want.user_id == who.user_id && want.admin == who.admin);
        json_decref(claims);

        struct identity other;
        CHECK(auth_verify(header, "another-secret-another-secret-32!", NOW, &other) == TD_EINVAL);
        check_identity(TD_EINVAL, &other);
    } else if (nl == NULL && strlen(header) <= 7 + 4096) {
        /* Refused with the standard header: the claims must be wrong.
         * (Claims that are not a JSON object, or not UTF-8, are refused
         * by the decoding; load_segment and claims_ok refuse those too.) */
        json_t *claims = load_segment(data, size);
        struct identity want = {0};
        CHECK(!claims_ok(claims, &want));
        json_decref(claims);
    }
    free(header);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    raw(data, size);
    signed_claims(data, size);
    return 0;
}
