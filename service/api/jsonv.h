/* jsonv.h - strict parsing and validation of request bodies.
 *
 * jansson accepts duplicate keys (last wins) and reads 2.0 or 1e3 as
 * numbers; a payment amount or a quantity must not be ambiguous, so bodies
 * are parsed with JSON_REJECT_DUPLICATES and integers must be JSON integers.
 * And jansson parses nesting by recursion, 2,048 levels deep: a body of
 * brackets only would take a fiber's stack deep for nothing, so a body's
 * nesting is bounded (JSONV_MAX_DEPTH) before it is parsed.
 * Pure; thread-safe. */
#ifndef TICKETD_JSONV_H
#define TICKETD_JSONV_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The deepest nesting of objects and arrays a request body may have: the
 * deepest of ticketd's own bodies has 3 levels (a cart: {"items": [{...}]});
 * 32 leaves room for any client's envelope while a parse stays a few KiB of
 * stack (about 80 bytes a level in jansson). */
#define JSONV_MAX_DEPTH 32

/* Where data (len bytes, any bytes) first opens an object or an array
 * deeper than max_depth levels: the offset of that '{' or '['; len when it
 * never does. Brackets inside strings do not count (a backslash escapes
 * the byte after it). Reads each byte once, allocates nothing, does not
 * recurse: safe on bytes nobody has checked yet. */
size_t jsonv_too_deep(const char *data, size_t len, int max_depth);

/* False when data nests deeper than JSONV_MAX_DEPTH, with a reason in why
 * (cap bytes) and in field (field_cap bytes) the top-level member that
 * holds the deep value ("" when none can be named: the body is then not an
 * object, or the member's name is not readable). field may be NULL. */
bool jsonv_depth_ok(const char *data, size_t len, char *field, size_t field_cap, char *why,
                    size_t cap);

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
 * member can be named, field is "" (INVALID_JSON). A body nested deeper
 * than JSONV_MAX_DEPTH is refused as jsonv_depth_ok says, before jansson
 * reads it. A body holding a NUL byte anywhere is invalid. field may be
 * NULL. */
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
