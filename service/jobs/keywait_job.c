/* keywait_job.c - the key events listener (keywait_job.h). */
#include "keywait_job.h"

#include "err.h"
#include "faults.h"
#include "keyevents.h"
#include "keywait.h"
#include "log.h"

#include <stdbool.h>

/* One listen: short, so that a stop is seen within it. */
#define LISTEN_MS 200
/* Before dialling Redis again after a failure. */
#define RETRY_MS 500

struct keywait_listener {
    bool deaf; /* the test build's keywait.deaf: hears nothing */
};

static void keywait_job_open(struct job_ctx *c)
{
    struct keywait_listener *l = c->state;
    l->deaf = FAULT_POINT("keywait.deaf"); /* (fail) every announcement lost: waiters poll */
    log_info("key waits: woken by Redis announcements, polling every %d ms as the fallback",
             KEYWAIT_POLL_MS);
}

static int listen_tick(struct job_ctx *c)
{
    const struct keywait_listener *l = c->state;
    if (l->deaf)
        return RETRY_MS;
    return keyevents_listen(LISTEN_MS, keywait_notify, keywait_notify_all, NULL) == TD_OK
               ? 0
               : RETRY_MS;
}

static void keywait_job_finish(struct job_ctx *c)
{
    (void)c;
    keyevents_close();
}

const struct job keywait_job = {
    .name = "key events",
    .needs = JOB_CACHE,
    .state_size = sizeof(struct keywait_listener),
    .open = keywait_job_open,
    .tick = listen_tick,
    .finish = keywait_job_finish,
};
