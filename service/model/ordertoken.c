/* ordertoken.c - one-time order tokens made and checked (ordertoken.h):
 * random, expiring, signed. Apart and pure, so that a token Redis forgot can
 * be told from a made-up one without any I/O. */
#include "ordertoken.h"

#include "digest.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RANDOM_BYTES 24 /* 192 bits */
#define MAC_BYTES    16 /* 128 bits of the HMAC */
#define RANDOM_CHARS 32 /* base64url of RANDOM_BYTES */
#define MAC_CHARS    22 /* base64url of MAC_BYTES */

/* The MAC of (user, expiry, random) in base64url, into out (MAC_CHARS+1). */
static void sign(const char *secret, int64_t user_id, const char *expiry, const char *random,
                 size_t random_len, char *out)
{
    char msg[160];
    unsigned char mac[SHA256_BYTES];
    int n = snprintf(msg, sizeof msg, "ticketd-order-token|%lld|%s|%.*s", (long long)user_id,
                     expiry, (int)random_len, random);
    if (n < 0 || (size_t)n >= sizeof msg)
        abort(); /* the sizes are ours */
    hmac_sha256(secret, strlen(secret), msg, (size_t)n, mac);
    b64url_encode(mac, MAC_BYTES, out);
}

void ordertoken_new(const char *secret, int64_t user_id, int64_t expires_at, char *out)
{
    unsigned char raw[RANDOM_BYTES];
    char random[RANDOM_CHARS + 1], expiry[24], mac[MAC_CHARS + 1];
    rand_bytes(raw, sizeof raw);
    b64url_encode(raw, sizeof raw, random);
    snprintf(expiry, sizeof expiry, "%lld", (long long)expires_at);
    sign(secret, user_id, expiry, random, RANDOM_CHARS, mac);
    snprintf(out, ORDERTOKEN_MAX + 1, "%s.%s.%s", random, expiry, mac);
}

enum ordertoken_verdict ordertoken_check(const char *secret, int64_t user_id, int64_t now,
                                         const char *token)
{
    char expiry[24], want[MAC_CHARS + 1];
    int64_t expires_at;
    if (token == NULL || strlen(token) > ORDERTOKEN_MAX)
        return ORDERTOKEN_FORGED;
    const char *dot1 = strchr(token, '.');
    const char *dot2 = dot1 != NULL ? strchr(dot1 + 1, '.') : NULL;
    if (dot1 == NULL || dot2 == NULL || dot1 - token != RANDOM_CHARS ||
        (size_t)(dot2 - dot1 - 1) >= sizeof expiry || strlen(dot2 + 1) != MAC_CHARS)
        return ORDERTOKEN_FORGED;
    memcpy(expiry, dot1 + 1, (size_t)(dot2 - dot1 - 1));
    expiry[dot2 - dot1 - 1] = '\0';
    if (!parse_i64(expiry, 0, INT64_MAX, &expires_at))
        return ORDERTOKEN_FORGED;
    sign(secret, user_id, expiry, token, RANDOM_CHARS, want);
    if (!ct_equal(want, dot2 + 1, MAC_CHARS))
        return ORDERTOKEN_FORGED;
    return now < expires_at ? ORDERTOKEN_GENUINE : ORDERTOKEN_EXPIRED;
}

void ordertoken_key(const char *token, char *out)
{
    unsigned char h[SHA256_BYTES];
    sha256(token, strlen(token), h);
    hex_encode(h, sizeof h, out);
}
