/* idem.c - the Idempotency-Key's pure parts (idem.h): the header's
 * grammar, a payload's fingerprint, the text of a key's record. Apart so
 * that the defence's rules are tested without Redis. */
#include "idem.h"

#include "digest.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '-';
}

bool idem_parse_key(const char *header, char *out)
{
    if (header == NULL)
        return false;
    size_t n = strlen(header);
    const char *p = header;
    /* The IETF draft sends the key as an sf-string: "abc". */
    if (n >= 2 && p[0] == '"' && p[n - 1] == '"') {
        p++;
        n -= 2;
    }
    if (n == 0 || n > IDEM_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!key_char(p[i]))
            return false;
    }
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

void idem_fingerprint_order(int64_t session_id, int64_t quantity, char *out)
{
    char canon[96];
    unsigned char md[SHA256_BYTES];
    int n = snprintf(canon, sizeof canon, "POST /api/v1/orders\nsession_id=%lld\nquantity=%lld\n",
                     (long long)session_id, (long long)quantity);
    sha256(canon, (size_t)n, md);
    hex_encode(md, sizeof md, out);
}

bool idem_key_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > IDEM_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!key_char(s[i]))
            return false;
    }
    return true;
}

void idem_fingerprint_batch(const struct idem_item *items, size_t n, char *out)
{
    /* Keys hold no newline, so one line per field cannot be read two ways;
     * the count makes a list and its prefix differ even before hashing. */
    unsigned char md[SHA256_BYTES];
    size_t cap = 64 + n * (IDEM_KEY_MAX + 64), len = 0;
    char *canon = xmalloc(cap);
    len += (size_t)snprintf(canon, cap, "POST /api/v1/orders/batch\nitems=%zu\n", n);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(canon + len, cap - len, "key=%s\nsession_id=%lld\nquantity=%lld\n",
                                items[i].key, (long long)items[i].session_id,
                                (long long)items[i].quantity);
    sha256(canon, len, md);
    hex_encode(md, sizeof md, out);
    free(canon);
}

void idem_new_instance(char *out)
{
    unsigned char raw[IDEM_INSTANCE_LEN / 2];
    rand_bytes(raw, sizeof raw);
    hex_encode(raw, sizeof raw, out);
}

void idem_new_owner(const char *instance, char *out)
{
    unsigned char raw[(IDEM_OWNER_LEN - IDEM_INSTANCE_LEN) / 2];
    memcpy(out, instance, IDEM_INSTANCE_LEN);
    rand_bytes(raw, sizeof raw);
    hex_encode(raw, sizeof raw, out + IDEM_INSTANCE_LEN);
}

void idem_owner_instance(const char *owner, char *out)
{
    memcpy(out, owner, IDEM_INSTANCE_LEN);
    out[IDEM_INSTANCE_LEN] = '\0';
}

static bool hex_lower(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    }
    return true;
}

char *idem_marker(const char *fingerprint, const char *owner)
{
    return xasprintf("P|%s|%s", fingerprint, owner);
}

char *idem_done(const char *fingerprint, int status, const char *body, size_t body_len)
{
    return xasprintf("D|%s|%d|%.*s", fingerprint, status, (int)body_len, body);
}

bool idem_parse(const char *text, size_t len, struct idem_record *out)
{
    memset(out, 0, sizeof *out);
    /* "X|" + 64 hex + "|" at least. */
    if (len < 3 + IDEM_FP_LEN || text[1] != '|' || text[2 + IDEM_FP_LEN] != '|')
        return false;
    /* 'W': a marker a waiting copy marked watched (idem.h). */
    if ((text[0] != 'P' && text[0] != 'W' && text[0] != 'D') || !hex_lower(text + 2, IDEM_FP_LEN))
        return false;
    memcpy(out->fingerprint, text + 2, IDEM_FP_LEN);
    out->fingerprint[IDEM_FP_LEN] = '\0';
    out->done = text[0] == 'D';
    if (!out->done) {
        const char *owner = text + 3 + IDEM_FP_LEN;
        if (len != 3 + IDEM_FP_LEN + IDEM_OWNER_LEN || !hex_lower(owner, IDEM_OWNER_LEN))
            return false;
        memcpy(out->owner, owner, IDEM_OWNER_LEN);
        out->owner[IDEM_OWNER_LEN] = '\0';
        return true;
    }
    const char *p = text + 3 + IDEM_FP_LEN;
    const char *end = text + len;
    int status = 0;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9' && digits < 3) {
        status = status * 10 + (*p - '0');
        p++;
        digits++;
    }
    if (digits != 3 || status < 200 || status > 299 || p >= end || *p != '|')
        return false; /* only successes are ever recorded */
    out->status = status;
    out->body = p + 1;
    out->body_len = (size_t)(end - (p + 1));
    return true;
}
