/* cache_naive.h - the demo's naive cache: the Redis code the articles warn
 * about, as entries of the Redis adapter's table (cache_redis.h) that
 * replace the real ones. boot.c puts one in the table at boot for each
 * defence TICKETD_DEFENSES switches off (TICKETD_ENV=demo only); they read
 * no switch themselves. Built over the Redis adapter, in its folder (they
 * speak hiredis, which nothing outside redis/ does): what they do not
 * change, they leave to its real entries. */
#ifndef TICKETD_CACHE_NAIVE_H
#define TICKETD_CACHE_NAIVE_H

#include "cache_redis.h"

/* Computes the naive scripts' SHA1s. Connects nothing. */
void cache_naive_init(void);

/* token-atomic off: a token is checked with GET and spent by a separate
 * write, two round trips; and the key's script (key_begin) leaves the
 * token to that check (*token_rc TOKEN_UNCHECKED), setting the order-key
 * filter's bits as for an order without a token (a refusal by the check
 * leaves a false positive: one query). Between the two round trips
 * another request with the same token reads it unspent too. */
int cache_naive_token_take(int64_t user_id, const char *token, const char *idem_key);
enum key_begin cache_naive_key_begin(int64_t user_id, const char *key, const char *marker,
                                     int marker_ttl_ms, int64_t session_id, const char *owner,
                                     int lock_ttl_ms, const struct token_spend *tok, int *token_rc,
                                     const struct filter_note *note, bool *noted, char **existing);

/* lock-owner-check off: the session lock is released by a plain DEL,
 * whoever holds it now: a request slower than the lock's TTL frees the
 * lock another request took since. The key's record is handled as the
 * real entries do. */
extern struct redis_script cache_naive_complete;
extern struct redis_script cache_naive_release;

/* bloom-liveness off: any filter is trusted, the empty one a flushed
 * Redis starts with included, so its "no" is believed for a key whose
 * order exists. */
int cache_naive_bloom_check(const char *shape, const uint64_t *pos, int k, bool *trusted,
                            bool *maybe);

#endif
