#include "paysig.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

void paysig_sign(const char *secret, const char *timestamp, const char *body, size_t len,
                 char out[PAYSIG_HEX_LEN + 1])
{
    unsigned char mac[SHA256_BYTES];
    size_t tlen = strlen(timestamp);
    /* The signed text is the timestamp as sent, a dot, and the body byte
     * for byte: re-encoding the JSON would break genuine signatures. */
    unsigned char *msg = xmalloc(tlen + 1 + len);
    memcpy(msg, timestamp, tlen);
    msg[tlen] = '.';
    if (len > 0)
        memcpy(msg + tlen + 1, body, len);
    hmac_sha256(secret, strlen(secret), msg, tlen + 1 + len, mac);
    free(msg);
    hex_encode(mac, sizeof mac, out);
}

enum paysig_result paysig_verify(const char *secret, const char *timestamp, const char *signature,
                                 const char *body, size_t len, int64_t now, int64_t tolerance_s)
{
    char want[PAYSIG_HEX_LEN + 1];
    int64_t ts;
    if (secret == NULL || secret[0] == '\0' || timestamp == NULL || signature == NULL)
        return PAYSIG_BAD;
    /* The length is no secret; the bytes are compared in constant time.
     * Only lowercase hex can match, as the contract says. */
    if (strlen(signature) != PAYSIG_HEX_LEN)
        return PAYSIG_BAD;
    paysig_sign(secret, timestamp, body, len, want);
    if (!ct_equal(want, signature, PAYSIG_HEX_LEN))
        return PAYSIG_BAD;
    if (!parse_i64(timestamp, 0, INT64_MAX, &ts))
        return PAYSIG_BAD;
    int64_t skew = now - ts;
    if (skew > tolerance_s || skew < -tolerance_s)
        return PAYSIG_STALE;
    return PAYSIG_OK;
}
