/* events.c - starts and stops the asynchronous half (events.h): the
 * outbox relay (relay.h) and one consumer per group (consumers.h), over
 * the event stream (stream.h). */
#include "events.h"

#include "consume.h"
#include "consumers.h"
#include "log.h"
#include "relay.h"
#include "stream.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct events {
    struct relay *relay;
    struct consumer *consumers[CONSUME_GROUPS];
};

void events_stop(struct events *e)
{
    if (e == NULL)
        return;
    /* Every thread is asked first, so that their blocking reads end
     * together rather than one after the other. */
    relay_request_stop(e->relay);
    for (size_t i = 0; i < CONSUME_GROUPS; i++)
        consumer_request_stop(e->consumers[i]);
    relay_join(e->relay);
    for (size_t i = 0; i < CONSUME_GROUPS; i++)
        consumer_join(e->consumers[i]);
    free(e);
}

struct events *events_start(struct app *app)
{
    char host[64], name[160];
    struct events *e = xcalloc(1, sizeof *e);
    stream_init();
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';

    e->relay = relay_start(app);
    if (e->relay == NULL)
        goto fail;
    for (size_t i = 0; i < CONSUME_GROUPS; i++) {
        const struct consume_group *g = &consume_groups[i];
        /* host-pid-group-n: unique per process and thread. */
        snprintf(name, sizeof name, "%s-%d-%s-%zu", host, (int)getpid(), g->name, i + 1);
        e->consumers[i] = consumer_start(app, g, name);
        if (e->consumers[i] == NULL)
            goto fail;
    }
    log_info("events: relay to %s and consumers %s, %s started (%s-%d-*)", STREAM_NAME,
             consume_groups[0].name, consume_groups[1].name, host, (int)getpid());
    return e;
fail:
    events_stop(e);
    return NULL;
}
