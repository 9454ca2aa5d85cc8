/* idem.h - the pieces of the Idempotency-Key defence that are pure logic:
 * reading the header, fingerprinting a payload, and the text of the
 * records kept under the key in Redis. Thread-safe. */
#ifndef TICKETD_IDEM_H
#define TICKETD_IDEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IDEM_KEY_MAX      64
#define IDEM_FP_LEN       64 /* hex SHA-256 */
#define IDEM_OWNER_LEN    32
#define IDEM_INSTANCE_LEN 16 /* the owner's first characters name its process */

/* Reads an Idempotency-Key header: 1..64 of [A-Za-z0-9._:-], bare or as a
 * structured-field string ("abc", quotes stripped). Returns true and
 * writes the key to out (IDEM_KEY_MAX + 1 bytes). */
bool idem_parse_key(const char *header, char *out);

/* True when s, as it stands, obeys the key grammar (1..64 of
 * [A-Za-z0-9._:-]; no quotes): an item key of a cart. */
bool idem_key_valid(const char *s);

/* One item of a cart: an order under its own key. */
struct idem_item {
    char key[IDEM_KEY_MAX + 1];
    int64_t session_id;
    int64_t quantity;
};

/* The fingerprint of a cart's item list, in the request's order (the
 * answer lists the items in that order, so another order is another
 * list): hex SHA-256 of each item's validated fields. out: IDEM_FP_LEN + 1
 * bytes. */
void idem_fingerprint_batch(const struct idem_item *items, size_t n, char *out);

/* The fingerprint of an order request: hex SHA-256 of its validated,
 * canonical fields, so that whitespace or key order in the JSON does not
 * make the same request look different. out: IDEM_FP_LEN + 1 bytes. */
void idem_fingerprint_order(int64_t session_id, int64_t quantity, char *out);

/* A random id for one ticketd process (IDEM_INSTANCE_LEN + 1 bytes). */
void idem_new_instance(char *out);

/* A random owner id for markers and locks, so that a request deletes only
 * what it set itself: the instance's id, then random characters, so that
 * whoever finds the marker can ask whether its process is still alive.
 * out: IDEM_OWNER_LEN + 1 bytes. */
void idem_new_owner(const char *instance, char *out);

/* The instance part of an owner id, into out (IDEM_INSTANCE_LEN + 1). */
void idem_owner_instance(const char *owner, char *out);

/* Record texts. In flight: "P|<fp>|<owner>", or "W|<fp>|<owner>" once a
 * waiting copy (Prefer: wait) marked it watched, so that its end is
 * announced (redis/cache_scripts.c); both parse alike. Done:
 * "D|<fp>|<status>|<body>". The encoders return new strings (caller
 * frees). */
char *idem_marker(const char *fingerprint, const char *owner);
char *idem_done(const char *fingerprint, int status, const char *body, size_t body_len);

struct idem_record {
    bool done;
    char fingerprint[IDEM_FP_LEN + 1];
    char owner[IDEM_OWNER_LEN + 1]; /* in flight only: who set the marker */
    int status;                     /* done only */
    const char *body;               /* done only; borrowed from the parsed text */
    size_t body_len;
};

/* Parses a record text. Returns false for anything malformed (treated by
 * callers as no record: the database still decides). */
bool idem_parse(const char *text, size_t len, struct idem_record *out);

#endif
