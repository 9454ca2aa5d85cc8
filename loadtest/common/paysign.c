#include "paysign.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>

int paysign(const char *secret, const char *timestamp, const char *body, size_t body_len,
            char hex[PAYSIGN_HEX_LEN])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    size_t ts_len = strlen(timestamp);
    char *msg;

    if (secret == NULL || secret[0] == '\0')
        return -1;
    /* "<timestamp>.<body>": the body's bytes exactly, NULs included. */
    msg = malloc(ts_len + 1 + body_len + 1);
    if (msg == NULL)
        return -1;
    memcpy(msg, timestamp, ts_len);
    msg[ts_len] = '.';
    if (body_len > 0)
        memcpy(msg + ts_len + 1, body, body_len);
    if (HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)msg,
             ts_len + 1 + body_len, mac, &mac_len) == NULL ||
        mac_len != 32) {
        free(msg);
        return -1;
    }
    free(msg);
    for (unsigned i = 0; i < mac_len; i++) {
        hex[2 * i] = digits[mac[i] >> 4];
        hex[2 * i + 1] = digits[mac[i] & 15];
    }
    hex[2 * mac_len] = '\0';
    return 0;
}

/* The key of a Standard Webhooks secret: whsec_<base64> decoded, anything
 * else its own bytes. Returns the key's length, or -1. */
static int webhook_key(const char *secret, unsigned char *key, size_t cap)
{
    static const char prefix[] = "whsec_";
    size_t n = strlen(secret), plen = sizeof prefix - 1;
    if (n <= plen || strncmp(secret, prefix, plen) != 0) {
        if (n > cap)
            return -1;
        memcpy(key, secret, n);
        return (int)n;
    }
    const char *b64 = secret + plen;
    size_t blen = n - plen;
    if (blen % 4 != 0 || blen / 4 * 3 > cap)
        return -1;
    /* EVP_DecodeBlock counts the padding as zero bytes: take them off. */
    int got = EVP_DecodeBlock(key, (const unsigned char *)b64, (int)blen);
    if (got < 0)
        return -1;
    for (size_t i = blen; i > 0 && b64[i - 1] == '='; i--)
        got--;
    return got;
}

int paysign_webhook(const char *secret, const char *id, const char *timestamp, const char *body,
                    size_t body_len, char sig[PAYSIGN_WEBHOOK_LEN])
{
    unsigned char key[512], mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    size_t id_len = strlen(id), ts_len = strlen(timestamp);
    int key_len;
    char *msg;

    if (secret == NULL || secret[0] == '\0')
        return -1;
    key_len = webhook_key(secret, key, sizeof key);
    if (key_len <= 0)
        return -1;
    /* "<id>.<timestamp>.<body>": the body's bytes exactly. */
    msg = malloc(id_len + 1 + ts_len + 1 + body_len + 1);
    if (msg == NULL)
        return -1;
    memcpy(msg, id, id_len);
    msg[id_len] = '.';
    memcpy(msg + id_len + 1, timestamp, ts_len);
    msg[id_len + 1 + ts_len] = '.';
    if (body_len > 0)
        memcpy(msg + id_len + ts_len + 2, body, body_len);
    if (HMAC(EVP_sha256(), key, key_len, (const unsigned char *)msg, id_len + ts_len + 2 + body_len,
             mac, &mac_len) == NULL ||
        mac_len != 32) {
        free(msg);
        return -1;
    }
    free(msg);
    memcpy(sig, "v1,", 3);
    EVP_EncodeBlock((unsigned char *)sig + 3, mac, (int)mac_len); /* 44 characters and a NUL */
    return 0;
}
