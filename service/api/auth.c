/* auth.c - bearer tokens checked (auth.h): the HS256 JWT rules and a small
 * per-loop cache of tokens already verified. Apart from the handlers so
 * that every rule a token must pass is in one file, tested alone. */
#include "auth.h"

#include "err.h"
#include "digest.h"
#include "util.h"

#include <jansson.h>
#include <jwt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A JWT of ours is a few hundred bytes; refuse to parse novels. */
#define AUTH_MAX_TOKEN 4096

enum claim { CLAIM_ABSENT, CLAIM_INT, CLAIM_BAD };

/* What a numeric claim is: absent, a JSON integer (into *out), or anything
 * else (a string, a real, null, ...), which is refused, never read as 0:
 * "nbf":"9999999999" must not pass as an nbf of 0. */
static enum claim claim_int(const json_t *claims, const char *name, long *out)
{
    const json_t *v = json_object_get(claims, name);
    if (v == NULL)
        return CLAIM_ABSENT;
    if (!json_is_integer(v) || json_integer_value(v) < LONG_MIN || json_integer_value(v) > LONG_MAX)
        return CLAIM_BAD;
    *out = (long)json_integer_value(v);
    return CLAIM_INT;
}

/* A string claim without embedded NULs, or NULL. */
static const char *claim_str(const json_t *claims, const char *name)
{
    const json_t *v = json_object_get(claims, name);
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
        return NULL;
    return json_string_value(v);
}

/* One base64url segment of a token, decoded and parsed as a JSON object
 * (a key given twice is refused: which one would count?). */
static json_t *segment_json(const char *seg, size_t n)
{
    unsigned char buf[AUTH_MAX_TOKEN];
    long len = b64url_decode(seg, n, buf, sizeof buf);
    if (len < 0)
        return NULL;
    json_t *v = json_loadb((const char *)buf, (size_t)len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(v)) {
        json_decref(v);
        return NULL;
    }
    return v;
}

/* A token's header segment accepted last on this thread: an issuer signs
 * every token with the same header, so the same text, already decoded and
 * found good, is not parsed again. Only an accepted header is kept. */
#define HEADER_KEPT_MAX 128
static _Thread_local char header_kept[HEADER_KEPT_MAX];
static _Thread_local size_t header_kept_len;

/* Whether a token's header (its first segment, n bytes, signature already
 * checked) names HS256 and no critical extension. The key decides the
 * algorithm, never the token: a header that names "none", or anything but
 * HS256, is refused even with a good signature. */
static bool header_ok(const char *seg, size_t n)
{
    if (n > 0 && n == header_kept_len && memcmp(seg, header_kept, n) == 0)
        return true;
    json_t *header = segment_json(seg, n);
    const char *alg = claim_str(header, "alg");
    bool hs256 = alg != NULL && strcmp(alg, "HS256") == 0;
    /* RFC 7515 4.1.11: a header that lists critical extensions must be
     * refused by a reader that does not understand every one of them.
     * ticketd understands none, and an empty or malformed "crit" is
     * invalid in itself, so any "crit" refuses the token. */
    bool critical = json_object_get(header, "crit") != NULL;
    json_decref(header);
    if (!hs256 || critical)
        return false;
    if (n <= HEADER_KEPT_MAX) {
        memcpy(header_kept, seg, n);
        header_kept_len = n;
    }
    return true;
}

/* The claims of an HS256 token whose signature the secret made, or NULL.
 * The signature is checked first, so nothing an attacker wrote is parsed
 * before it is known to be ours; then the header (header_ok). The shape
 * (three non-empty segments) is checked by the caller. */
static json_t *hs256_claims(const char *token, size_t n, const char *secret)
{
    const char *dot1 = memchr(token, '.', n);
    const char *dot2 = memchr(dot1 + 1, '.', n - (size_t)(dot1 + 1 - token));
    const char *sig = dot2 + 1;
    unsigned char got[SHA256_BYTES], want[SHA256_BYTES]; /* a longer one does not fit */
    if (b64url_decode(sig, n - (size_t)(sig - token), got, sizeof got) != SHA256_BYTES)
        return NULL;
    hmac_sha256(secret, strlen(secret), token, (size_t)(dot2 - token), want);
    if (!ct_equal(got, want, SHA256_BYTES))
        return NULL;

    if (!header_ok(token, (size_t)(dot1 - token)))
        return NULL;
    return segment_json(dot1 + 1, (size_t)(dot2 - dot1 - 1));
}

/* Three non-empty base64url segments, and nothing else, before anything
 * is decoded: hs256_claims relies on the two dots, and an HS256 token
 * always has a signature, so an empty third segment (alg "none") is
 * refused here too. */
static bool token_shape_ok(const char *t)
{
    int segments = 1;
    size_t seg_len = 0;
    for (const char *p = t;; p++) {
        if (*p == '.' || *p == '\0') {
            /* A base64 length of 4k+1 cannot be decoded. */
            if (seg_len == 0 || seg_len % 4 == 1)
                return false;
            if (*p == '\0')
                break;
            segments++;
            seg_len = 0;
            continue;
        }
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_';
        if (!ok)
            return false;
        seg_len++;
    }
    return segments == 3;
}

/* Clients send the same token with request after request, and decoding
 * and verifying it is most of what a cheap request costs (a replay). Each
 * loop's thread keeps the last tokens it verified (api_begin checks them on
 * the loop), keyed by their exact text and the secret they were verified
 * with; a hit still checks `exp`. Inline buffers, no allocation, nothing
 * shared between loops. */
#define VERIFIED_SLOTS 64
#define VERIFIED_MAX   512 /* longer tokens are simply not remembered */

struct verified {
    uint64_t hash; /* of the token and the secret; 0: empty slot */
    uint64_t secret_hash;
    long exp;
    struct identity who;
    size_t len;
    char token[VERIFIED_MAX];
};

static _Thread_local struct verified verified[VERIFIED_SLOTS];

static uint64_t fnv1a(const char *s, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static struct verified *verified_slot(const char *token, size_t n, uint64_t secret_hash,
                                      uint64_t *hash)
{
    *hash = fnv1a(token, n, secret_hash) | 1; /* never 0 */
    return &verified[*hash % VERIFIED_SLOTS];
}

static bool verified_hit(const char *token, size_t n, const char *secret, int64_t now,
                         struct identity *who)
{
    uint64_t sh = fnv1a(secret, strlen(secret), 1469598103934665603ull), h;
    struct verified *v = verified_slot(token, n, sh, &h);
    if (v->hash != h || v->secret_hash != sh || v->len != n || memcmp(v->token, token, n) != 0)
        return false;
    if (v->exp <= now)
        return false;
    *who = v->who;
    return true;
}

static void verified_put(const char *token, size_t n, const char *secret, long exp,
                         const struct identity *who)
{
    if (n > VERIFIED_MAX)
        return;
    uint64_t sh = fnv1a(secret, strlen(secret), 1469598103934665603ull), h;
    struct verified *v = verified_slot(token, n, sh, &h);
    v->hash = h;
    v->secret_hash = sh;
    v->exp = exp;
    v->who = *who;
    v->len = n;
    memcpy(v->token, token, n);
}

int auth_verify(const char *header, const char *secret, int64_t now, struct identity *who)
{
    int rc = TD_EINVAL;
    json_t *claims = NULL;
    memset(who, 0, sizeof *who);

    if (header == NULL || strncasecmp(header, "Bearer ", 7) != 0)
        goto out;
    const char *token = header + 7;
    while (*token == ' ')
        token++;
    size_t n = strlen(token);
    if (n == 0 || n > AUTH_MAX_TOKEN)
        goto out;
    if (verified_hit(token, n, secret, now, who))
        return TD_OK;
    if (!token_shape_ok(token))
        goto out;

    claims = hs256_claims(token, n, secret);
    if (claims == NULL)
        goto out;

    /* exp: an integer in the future. nbf and iat: absent, or integers;
     * nbf not in the future. */
    long exp, nbf, iat;
    if (claim_int(claims, "exp", &exp) != CLAIM_INT || exp <= now)
        goto out;
    switch (claim_int(claims, "nbf", &nbf)) {
    case CLAIM_ABSENT:
        break;
    case CLAIM_INT:
        if (nbf > now)
            goto out;
        break;
    case CLAIM_BAD:
        goto out;
    }
    if (claim_int(claims, "iat", &iat) == CLAIM_BAD)
        goto out;

    const char *sub = claim_str(claims, "sub");
    int64_t uid;
    if (sub == NULL || sub[0] == '0' || !parse_i64(sub, 1, AUTH_MAX_USER_ID, &uid))
        goto out;

    const char *role = claim_str(claims, "role");
    who->user_id = uid;
    who->admin = role != NULL && strcmp(role, "admin") == 0;
    verified_put(token, n, secret, exp, who);
    rc = TD_OK;
out:
    json_decref(claims);
    return rc;
}

char *auth_issue(const char *secret, int64_t user_id, bool admin, int64_t now, int64_t ttl_s)
{
    char *out = NULL;
    jwt_t *jwt = NULL;
    char sub[24];
    if (jwt_new(&jwt) != 0)
        goto out;
    snprintf(sub, sizeof sub, "%lld", (long long)user_id);
    if (jwt_add_grant(jwt, "sub", sub) != 0 || jwt_add_grant_int(jwt, "iat", (long)now) != 0 ||
        jwt_add_grant_int(jwt, "exp", (long)(now + ttl_s)) != 0)
        goto out;
    if (admin && jwt_add_grant(jwt, "role", "admin") != 0)
        goto out;
    if (jwt_set_alg(jwt, JWT_ALG_HS256, (const unsigned char *)secret, (int)strlen(secret)) != 0)
        goto out;
    out = jwt_encode_str(jwt);
out:
    jwt_free(jwt);
    return out;
}
