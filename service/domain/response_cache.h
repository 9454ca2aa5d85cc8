/* response_cache.h - the response cache (orders.h, layer 1): a completed
 * request's answer, replayed byte for byte to the key's retries. Two
 * places keep it: this process (here: bounded, no I/O, so the loop that
 * read the request may ask it at once, before any fiber) and Redis, the
 * key's completed record, which the key protocol replays (inflight_key.h).
 * Thread-safe. */
#ifndef TICKETD_RESPONSE_CACHE_H
#define TICKETD_RESPONSE_CACHE_H

#include "order_types.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct app;

/* True when the lesson has the cache: the demo may switch it off. */
bool response_cache_on(const struct app *app);

/* A key this process answered: true, with *res filled (a replay, or 422
 * when fp differs from the payload the answer was given for). */
bool response_cache_replay(struct app *app, int64_t user_id, const char *key, const char *fp,
                           struct order_result *res);

/* Keeps an answer (copied) for the key's retries, as long as Redis keeps
 * its record (TICKETD_IDEM_TTL_S). */
void response_cache_keep(struct app *app, int64_t user_id, const char *key, const char *fp,
                         int status, const char *body, size_t len);

#endif
