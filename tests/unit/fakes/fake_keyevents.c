/* fake_keyevents.c - the key events port (keyevents.h) for unit tests:
 * a watch answers fake_keyevents_watch_rc and counts itself; nothing is
 * ever announced, so a waiter off a fiber looks again after each poll. */
#include "fakes.h"
#include "keyevents.h"

#include "err.h"

int fake_keyevents_watch_rc = TD_OK;
int fake_keyevents_watches;

int keyevents_watch(int64_t user_id, const char *key, const char *seen)
{
    (void)user_id, (void)key, (void)seen;
    fake_call("keyevents_watch");
    fake_keyevents_watches++;
    return fake_keyevents_watch_rc;
}

int keyevents_listen(int timeout_ms, keyevents_fn *on_key, keyevents_resync_fn *on_resync,
                     void *arg)
{
    (void)timeout_ms, (void)on_key, (void)on_resync, (void)arg;
    return TD_OK;
}

void keyevents_close(void)
{
}
