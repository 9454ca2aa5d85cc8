/* order_key_filter.c - the order-key filter's rules of trust
 * (order_key_filter.h): when its "no" is believed, and when it is told of
 * a key. Its bits are Redis's (cache.h); the build that makes a filter
 * complete is a job (bloom_job.c). */
#include "order_key_filter.h"

#include "app.h"
#include "bloom.h"
#include "cache.h"
#include "defences.h"
#include "err.h"
#include "metrics.h"

#include <stdatomic.h>

/* Stays a switch: the lesson is the look-ups a refusal costs without it.
 * The filter always has bits when on: TICKETD_BLOOM_EXPECTED_KEYS is at
 * least 1000 (config.c) and bloom_size gives at least 64 bits. */
static bool filter_on(const struct app *app)
{
    return app->defences & DEFENCE_BLOOM;
}

/* The order-key filter (bloom.h), asked before the refusal's database
 * look-up: may this user have an order under this key? Its "certainly
 * not" is only as good as what it has seen, so it is taken only from a
 * filter that is complete (built from the orders table since Redis last
 * lost its records, bloom_job.h) and only while this process has told it
 * of every order it recorded. A "maybe", true or false, costs the query
 * it would have cost without a filter: never a wrong answer. Returns
 * false when the look-up can be skipped. */
bool order_key_filter_may_have(struct app *app, int64_t user_id, const char *key)
{
    uint64_t pos[BLOOM_MAX_K];
    bool trusted = false, maybe = true;
    if (!filter_on(app))
        return true;
    bloom_positions(app->bloom, user_id, key, pos);
    /* (The demo's naive cache, bloom-liveness off, calls any filter
     * trusted: cache_naive.h.) */
    if (cache_bloom_check(app->bloom_shape, pos, app->bloom.k, &trusted, &maybe) != TD_OK)
        return true;
    if (maybe) {
        metrics_inc(M_BLOOM_MAYBE);
        return true;
    }
    if (!trusted || atomic_load(&app->bloom_missed)) {
        metrics_inc(M_BLOOM_UNTRUSTED);
        return true;
    }
    metrics_inc(M_BLOOM_SAVED);
    return false;
}

void order_key_filter_prepare(struct app *app, int64_t user_id, const char *key,
                              uint64_t pos[BLOOM_MAX_K], struct filter_note *note)
{
    note->pos = pos;
    note->k = 0;
    if (!filter_on(app))
        return;
    bloom_positions(app->bloom, user_id, key, pos);
    note->k = app->bloom.k;
}

/* The key has, or may have in a moment, an order: the filter must know
 * it. Told before the order's transaction, not after its COMMIT: a copy
 * refused between the COMMIT and a later add would be believed ("no
 * order") though the order exists, and a process dying there would leave
 * the key out for good. Most often the key's script has told it already,
 * in the round trip that let the order go on (order_key_filter_prepare);
 * otherwise (a token Redis forgot, the key layers off, Redis failed) it is
 * told here. A transaction that then fails leaves a false positive, which
 * costs one query. When the filter cannot be told, it stops being trusted:
 * here at once (app->bloom_missed), and everywhere else through the row
 * the order writes (order_key_filter_misses), which outlives this
 * process. Returns false when it could not be told. */
bool order_key_filter_note(struct app *app, int64_t user_id, const char *key, bool noted)
{
    uint64_t pos[BLOOM_MAX_K];
    if (!filter_on(app) || noted)
        return true;
    bloom_positions(app->bloom, user_id, key, pos);
    if (cache_bloom_add(pos, app->bloom.k) == TD_OK)
        return true;
    atomic_store(&app->bloom_missed, true);
    return false;
}
