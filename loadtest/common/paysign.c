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
