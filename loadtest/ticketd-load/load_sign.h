/*
 * load_sign.h - the credentials ticketd-load presents: user and admin JWTs
 * (HS256). The payment gateway's callback signature is paysign.h's.
 *
 * ticketd-load mints these itself from the shared secrets so that it needs
 * nothing from the service under test. Thread-safe: no state besides the
 * caller's buffers.
 */
#ifndef LOADTEST_LOAD_SIGN_H
#define LOADTEST_LOAD_SIGN_H

#include <stddef.h>
#include <stdint.h>

/* A JWT for user ids up to 2^53 fits in this many bytes with room to spare. */
#define SIGN_JWT_MAX 512

/*
 * Writes an HS256 JWT with claims sub = user_id (decimal string),
 * iat = now, exp = now + ttl_s and, if admin, role = "admin", into out
 * (SIGN_JWT_MAX bytes). Returns 0, or -1 if the secret is empty or the
 * token does not fit.
 */
int sign_jwt(const char *secret, uint64_t user_id, int admin, long ttl_s, char *out, size_t outlen);

/* The same with explicit iat and exp claims (for tests). */
int sign_jwt_at(const char *secret, uint64_t user_id, int admin, long long iat, long long exp,
                char *out, size_t outlen);

#endif
