/* jsonv.h - strict parsing and validation of request bodies.
 *
 * jansson accepts duplicate keys (last wins) and reads 2.0 or 1e3 as
 * numbers; a payment amount or a quantity must not be ambiguous, so bodies
 * are parsed with JSON_REJECT_DUPLICATES and integers must be JSON integers.
 * Pure; thread-safe. */
#ifndef TICKETD_JSONV_H
#define TICKETD_JSONV_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parses a body that must be one JSON object. Returns a new reference, or
 * NULL with a reason in why (cap bytes). An empty body is an error here;
 * callers that accept none check len first. */
json_t *jsonv_parse_object(const char *data, size_t len, char *why, size_t cap);

/* Like jsonv_parse_object, for request bodies, which must also say which
 * field was wrong: when the body is refused because a number in it is
 * beyond what the parser holds (an integer outside int64, such as 2^63,
 * or a real that overflows, such as 1e309), field (field_cap bytes) gets
 * the path of the member that number belongs to (quantity,
 * items[0].session_id), and the caller answers VALIDATION_FAILED for that
 * field. Otherwise, or when no
 * member can be named, field is "" (INVALID_JSON). A body holding a NUL
 * byte anywhere is invalid. field may be NULL. */
json_t *jsonv_parse_body(const char *data, size_t len, char *field, size_t field_cap, char *why,
                         size_t cap);

/* Reads an integer field in [min, max]. Returns TD_OK, or TD_EINVAL with a
 * reason in why; *out is set only on success. Missing counts as invalid. */
int jsonv_int(const json_t *obj, const char *field, int64_t min, int64_t max, int64_t *out,
              char *why, size_t cap);

/* Reads a string field of 1..max_len bytes. *out is borrowed from obj. */
int jsonv_string(const json_t *obj, const char *field, size_t max_len, const char **out, char *why,
                 size_t cap);

#endif
