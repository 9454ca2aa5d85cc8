/* fake_stream.c - the event stream port (stream.h) answered from the knobs
 * of fake_events.h. */
#include "fake_events.h"
#include "stream.h"

#include "err.h"

#include <stdio.h>
#include <string.h>

struct fake_stream fake_stream;

void stream_init(void)
{
}

int stream_append(const struct outbox_event *ev, char stream_id[STREAM_ID_MAX + 1])
{
    (void)ev;
    fake_call("stream_append");
    if (fake_stream.append_rc != TD_OK)
        return fake_stream.append_rc;
    snprintf(stream_id, STREAM_ID_MAX + 1, "%d-0", ++fake_stream.appends);
    return TD_OK;
}

int stream_has(const char *id, bool *exists)
{
    fake_call("stream_has");
    fake_stream.has_calls++;
    *exists = true;
    for (int i = 0; i < fake_stream.ngone; i++)
        if (strcmp(fake_stream.gone[i], id) == 0)
            *exists = false;
    return TD_OK;
}

int stream_lag(int64_t *lag)
{
    *lag = 0;
    return TD_OK;
}

int stream_group_ensure(const char *group, bool *created)
{
    (void)group;
    *created = false;
    return TD_OK;
}

int stream_read(const char *group, const char *consumer, const char *own, int count, int block_ms,
                stream_entry_fn each, void *ctx, size_t *n)
{
    (void)group, (void)consumer, (void)own, (void)count, (void)block_ms, (void)each, (void)ctx;
    *n = 0;
    return TD_OK;
}

int stream_claim(const char *group, const char *consumer, int idle_ms, int count,
                 char cursor[STREAM_ID_MAX + 1], stream_entry_fn each, void *ctx)
{
    (void)group, (void)consumer, (void)idle_ms, (void)count, (void)each, (void)ctx;
    snprintf(cursor, STREAM_ID_MAX + 1, "0-0");
    return TD_OK;
}

int stream_deliveries(const char *group, const char *id, int64_t *count)
{
    (void)group, (void)id;
    *count = 1;
    return TD_OK;
}

int stream_ack(const char *group, const char *id)
{
    (void)group;
    fake_call("stream_ack");
    if (fake_stream.ack_rc != TD_OK)
        return fake_stream.ack_rc;
    fake_stream.acks++;
    snprintf(fake_stream.acked, sizeof fake_stream.acked, "%s", id);
    return TD_OK;
}

int stream_bury(const char *group, const struct stream_entry *en, int64_t deliveries,
                const char *reason)
{
    (void)group, (void)en, (void)deliveries;
    fake_call("stream_bury");
    if (fake_stream.bury_rc != TD_OK)
        return fake_stream.bury_rc;
    fake_stream.buries++;
    snprintf(fake_stream.bury_reason, sizeof fake_stream.bury_reason, "%s", reason);
    return TD_OK;
}

void stream_leave(const char *group, const char *consumer)
{
    (void)group, (void)consumer;
}
