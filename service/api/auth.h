/* auth.h - who is calling: HS256 JWTs for users and admins.
 *
 * A token is accepted only when its header says HS256, its signature
 * matches the secret, `exp` is a JSON integer in the future, `nbf` and
 * `iat`, if present, are JSON integers (`nbf` not in the future; a string
 * or a real is refused, never ignored) and `sub` is a user id in
 * 1..2^53-1 written as a decimal string. The header and the claims are
 * each one JSON object in canonical base64url, with no key given twice
 * and no NUL inside a string. Anything else is rejected the same way
 * (401): callers learn nothing about which check failed. Thread-safe. */
#ifndef TICKETD_AUTH_H
#define TICKETD_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#define AUTH_MAX_USER_ID ((int64_t)9007199254740991) /* 2^53 - 1 */

struct identity {
    int64_t user_id;
    bool admin;
};

/* Verifies an Authorization header value ("Bearer <jwt>"). Returns TD_OK
 * and fills *who, or TD_EINVAL (who cleared). header may be NULL. */
int auth_verify(const char *header, const char *secret, int64_t now, struct identity *who);

/* Returns a new signed token (caller frees), or NULL on failure. */
char *auth_issue(const char *secret, int64_t user_id, bool admin, int64_t now, int64_t ttl_s);

#endif
