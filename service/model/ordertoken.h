/* ordertoken.h - the text of a one-time order token: random, and signed.
 *
 * A token is "<random>.<expiry>.<mac>": 192 random bits (base64url), the
 * unix second it expires, and the first 128 bits of
 * HMAC-SHA256(secret, "ticketd-order-token|<user>|<expiry>|<random>").
 * Whether a token is *spent* is kept by Redis (cache.h) and, for a token
 * that bought an order, by the database too (ordertoken_key, written in the
 * order's transaction). The signature answers the one question Redis cannot
 * after it lost its records (flushed, restarted without persistence): did
 * ticketd issue this token to this user, and is it still valid? A genuine,
 * unexpired token that Redis no longer knows is one Redis forgot, and the
 * request goes on to the database, which decides alone, as whenever Redis
 * cannot vouch: one order per key, and one order per token.
 *
 * Pure functions; thread-safe. */
#ifndef TICKETD_ORDERTOKEN_H
#define TICKETD_ORDERTOKEN_H

#include <stdint.h>

#define ORDERTOKEN_MAX 96 /* characters, far above what ordertoken_new writes */

/* Writes a new token for user_id, valid until expires_at, to out
 * (ORDERTOKEN_MAX + 1 bytes). */
void ordertoken_new(const char *secret, int64_t user_id, int64_t expires_at, char *out);

enum ordertoken_verdict {
    ORDERTOKEN_GENUINE, /* issued by us to this user, not yet expired */
    ORDERTOKEN_EXPIRED, /* issued by us to this user, expired */
    ORDERTOKEN_FORGED,  /* anything else: malformed, another user's, made up */
};

/* Checks token's signature and expiry for user_id at now (unix s). */
enum ordertoken_verdict ordertoken_check(const char *secret, int64_t user_id, int64_t now,
                                         const char *token);

/* The key the database records a spent token under: the SHA-256 of its
 * text in lowercase hex, into out (ORDERTOKEN_KEY_LEN + 1 bytes). The token
 * is a bearer secret; its hash is all a uniqueness check needs. */
#define ORDERTOKEN_KEY_LEN 64
void ordertoken_key(const char *token, char *out);

#endif
