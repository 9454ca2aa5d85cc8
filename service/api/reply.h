/* reply.h - the handlers' helpers (api_*.c): the request body as JSON,
 * the answer to a failure, the API's records as JSON, an id from the path.
 * Below the handlers and the dispatcher (api.c), calling neither. */
#ifndef TICKETD_REPLY_H
#define TICKETD_REPLY_H

#include "api.h"
#include "model.h"
#include "req.h"
#include "resp.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* Parses the request body as one JSON object. Returns a new reference, or
 * NULL after writing the problem into w: 400 INVALID_JSON, or 400
 * VALIDATION_FAILED naming the field whose number is too large to parse
 * (2^63, 1e309) or whose value nests deeper than JSONV_MAX_DEPTH. */
json_t *api_body_object(const struct req *r, struct resp *w);

/* The dispatcher's check of every body, before any handler: true when the
 * body nests objects and arrays at most JSONV_MAX_DEPTH levels deep; else
 * false after writing the problem into w, 400 VALIDATION_FAILED naming the
 * top-level member that holds the deep value, or 400 INVALID_JSON when the
 * body is no object that names one. */
bool api_body_shallow(const struct req *r, struct resp *w);

/* For requests that take no fields: accepts an empty body or {}; anything
 * else gets its problem written into w (INVALID_JSON, or VALIDATION_FAILED
 * naming the first field) and false. */
bool api_no_input(const struct req *r, struct resp *w);

/* Writes the problem for a domain error that has no more specific answer:
 * 503 DEPENDENCY_UNAVAILABLE with Retry-After, or 500. */
void api_fail(struct resp *w, int err, const char *what);

/* New JSON objects for the records of the API (caller owns them). */
json_t *api_session_json(const struct session *s);
json_t *api_order_json(const struct order *o);

/* The end of a quick step that did not answer: the rest waits for Redis
 * and MySQL, so a fiber of the request's loop runs it (api_finish), with in (what the quick
 * step read, one allocation) as r->ctx, freed with the request. Returns
 * API_ON_FIBER, what the quick step then says. */
enum api_step api_hand_on(struct req *r, void *in);

/* Parses a decimal id path parameter in 1..2^53-1. */
bool api_parse_id(const char *s, int64_t *out);

#endif
