/* session_lock.c - the session lock taken on its own (session_lock.h):
 * when the key's script does not take it, because the demo switched the
 * key layers off or let a record through. Apart from the key protocol
 * because it is a defence of its own, with its own lesson: a new key for
 * the same click. */
#include "session_lock.h"

#include "app.h"
#include "cache.h"
#include "defences.h"
#include "err.h"
#include "metrics.h"

bool session_lock_on(const struct app *app)
{
    /* Stays a switch: the lesson is what a double click does without it. */
    return (app->defences & DEFENCE_SESSION_LOCK) != 0;
}

int session_lock_take(struct app *app, int64_t user_id, int64_t session_id, const char *owner)
{
    int rc = cache_lock_acquire(user_id, session_id, owner, app->cfg->lock_ttl_ms);
    if (rc == TD_ECONFLICT)
        metrics_inc(M_DUP_SESSION_LOCK);
    return rc;
}
