#include "load_sign.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* base64url without padding (RFC 7515 section 2). Returns the length
 * written, or 0 if out is too small. */
static size_t b64url(const unsigned char *in, size_t len, char *out, size_t outlen)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t need = (len * 4 + 2) / 3;
    size_t o = 0;
    size_t i;

    if (need + 1 > outlen)
        return 0;
    for (i = 0; i + 2 < len; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];

        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = tab[(v >> 6) & 63];
        out[o++] = tab[v & 63];
    }
    if (len - i == 1) {
        unsigned v = (unsigned)in[i] << 16;

        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
    } else if (len - i == 2) {
        unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8;

        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = tab[(v >> 6) & 63];
    }
    out[o] = '\0';
    return o;
}

static void hmac_sha256(const char *secret, const unsigned char *msg, size_t len,
                        unsigned char mac[32])
{
    unsigned int maclen = 32;

    HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, len, mac, &maclen);
}

int sign_jwt(const char *secret, uint64_t user_id, int admin, long ttl_s, char *out, size_t outlen)
{
    long long now = (long long)time(NULL);

    return sign_jwt_at(secret, user_id, admin, now, now + ttl_s, out, outlen);
}

int sign_jwt_at(const char *secret, uint64_t user_id, int admin, long long iat, long long exp,
                char *out, size_t outlen)
{
    static const char header[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
    char claims[160];
    unsigned char mac[32];
    size_t n;
    size_t m;
    int clen;

    if (secret == NULL || secret[0] == '\0')
        return -1;
    clen = snprintf(claims, sizeof(claims), "{\"sub\":\"%llu\",\"iat\":%lld,\"exp\":%lld%s}",
                    (unsigned long long)user_id, iat, exp, admin ? ",\"role\":\"admin\"" : "");
    if (clen < 0 || (size_t)clen >= sizeof(claims))
        return -1;
    n = b64url((const unsigned char *)header, sizeof(header) - 1, out, outlen);
    if (n == 0 || n + 2 >= outlen)
        return -1;
    out[n++] = '.';
    m = b64url((const unsigned char *)claims, (size_t)clen, out + n, outlen - n);
    if (m == 0)
        return -1;
    n += m;
    /* The signature covers "<header>.<claims>" exactly as encoded. */
    hmac_sha256(secret, (const unsigned char *)out, n, mac);
    if (n + 2 >= outlen)
        return -1;
    out[n++] = '.';
    m = b64url(mac, sizeof(mac), out + n, outlen - n);
    if (m == 0)
        return -1;
    return 0;
}
