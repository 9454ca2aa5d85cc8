/* stream_redis.c - the event stream port (stream.h) on Redis streams:
 * XADD, XREADGROUP, XAUTOCLAIM, XPENDING, XACK. */
#include "stream.h"

#include "err.h"
#include "log.h"
#include "redis.h"

#include <stdio.h>
#include <string.h>

#define STREAM      STREAM_NAME
#define DEAD_STREAM STREAM_NAME ":dead"
/* Approximate trimming keeps Redis's memory bounded. An entry trimmed
 * before every group has recorded it is noticed by the relay's redrive
 * check and published again, so trimming can delay an event but not lose
 * it. */
#define STREAM_MAXLEN "100000"

/* One round trip, and no BUSYGROUP error to tell from real ones. */
static struct redis_script group_create = {
    "local r = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')\n"
    "if type(r) == 'table' and r.err then\n"
    "  if string.find(r.err, 'BUSYGROUP', 1, true) == 1 then return 0 end\n"
    "  return r\n"
    "end\n"
    "return 1\n",
    "", NULL};

void stream_init(void)
{
    redis_script_prepare(&group_create);
}

static const redisReply *elem(const redisReply *r, size_t i)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
        return NULL;
    return r->element[i];
}

static bool is_str(const redisReply *r)
{
    return r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

static bool entry_parse(const redisReply *r, struct stream_entry *en)
{
    memset(en, 0, sizeof *en);
    const redisReply *id = elem(r, 0), *fields = elem(r, 1);
    if (!is_str(id))
        return false;
    en->id = id->str;
    if (fields == NULL || fields->type != REDIS_REPLY_ARRAY) {
        en->deleted = true;
        return true;
    }
    for (size_t i = 0; i + 1 < fields->elements; i += 2) {
        const redisReply *k = fields->element[i], *v = fields->element[i + 1];
        if (!is_str(k) || !is_str(v))
            continue;
        if (strcmp(k->str, "outbox_id") == 0) {
            en->outbox_id = v->str;
        } else if (strcmp(k->str, "event_type") == 0) {
            en->event_type = v->str;
        } else if (strcmp(k->str, "biz_key") == 0) {
            en->biz_key = v->str;
        } else if (strcmp(k->str, "payload") == 0) {
            en->payload = v->str;
            en->payload_len = v->len;
        }
    }
    return true;
}

/* Hands each well-formed entry of an array reply to each; see
 * stream_entry_fn for what its answer does. */
static int each_entry(const redisReply *entries, stream_entry_fn each, void *ctx)
{
    for (size_t i = 0; entries != NULL && i < entries->elements; i++) {
        struct stream_entry en;
        if (!entry_parse(entries->element[i], &en))
            continue;
        int rc = each(&en, ctx);
        if (rc != TD_OK)
            return rc < 0 ? rc : TD_OK;
    }
    return TD_OK;
}

/* A command whose reply only says whether it worked. */
static int stream_command(int argc, const char **argv)
{
    redisReply *r = NULL;
    int rc = redis_command(argc, argv, NULL, &r);
    freeReplyObject(r);
    return rc;
}

int stream_append(const struct outbox_event *ev, char stream_id[STREAM_ID_MAX + 1])
{
    char id[24];
    redisReply *r = NULL;
    snprintf(id, sizeof id, "%lld", (long long)ev->id);
    const char *argv[] = {"XADD",    STREAM,      "MAXLEN",  "~",          STREAM_MAXLEN,
                          "*",       "outbox_id", id,        "event_type", ev->event_type,
                          "biz_key", ev->biz_key, "payload", ev->payload};
    int rc = redis_command(14, argv, NULL, &r);
    if (rc == TD_OK) {
        if (is_str(r) && r->len <= STREAM_ID_MAX) {
            memcpy(stream_id, r->str, r->len + 1);
        } else {
            log_error("events: XADD answered something that is not an entry id");
            rc = TD_EINTERNAL;
        }
    }
    freeReplyObject(r);
    return rc;
}

int stream_has(const char *id, bool *exists)
{
    redisReply *r = NULL;
    *exists = false;
    const char *argv[] = {"XRANGE", STREAM, id, id, "COUNT", "1"};
    int rc = redis_command(6, argv, NULL, &r);
    if (rc == TD_OK)
        *exists = r->type == REDIS_REPLY_ARRAY && r->elements > 0;
    freeReplyObject(r);
    return rc;
}

/* A group's unacknowledged entries: its "pending" plus its "lag". */
static long long group_backlog(const redisReply *kv)
{
    long long sum = 0;
    for (size_t i = 0; kv->type == REDIS_REPLY_ARRAY && i + 1 < kv->elements; i += 2) {
        const redisReply *k = kv->element[i], *v = kv->element[i + 1];
        if (is_str(k) && v->type == REDIS_REPLY_INTEGER &&
            (strcmp(k->str, "pending") == 0 || strcmp(k->str, "lag") == 0))
            sum += v->integer;
    }
    return sum;
}

int stream_lag(int64_t *lag)
{
    redisReply *r = NULL;
    *lag = 0;
    /* XINFO on a stream that does not exist yet (a fresh or flushed Redis)
     * is an error reply; look before asking. */
    const char *exists[] = {"EXISTS", STREAM};
    int rc = redis_command(2, exists, NULL, &r);
    if (rc != TD_OK)
        return rc;
    bool present = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    r = NULL;
    if (!present)
        return TD_OK;
    const char *argv[] = {"XINFO", "GROUPS", STREAM};
    rc = redis_command(3, argv, NULL, &r);
    for (size_t g = 0; rc == TD_OK && r->type == REDIS_REPLY_ARRAY && g < r->elements; g++) {
        long long sum = group_backlog(r->element[g]);
        if (sum > *lag)
            *lag = sum;
    }
    freeReplyObject(r);
    return rc;
}

int stream_group_ensure(const char *group, bool *created)
{
    redisReply *r = NULL;
    const char *keys[] = {STREAM};
    const char *args[] = {group};
    int rc = redis_eval(&group_create, 1, keys, 1, args, &r);
    *created = rc == TD_OK && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return rc;
}

int stream_read(const char *group, const char *consumer, const char *own, int count, int block_ms,
                stream_entry_fn each, void *ctx, size_t *n)
{
    char cnt[16], block[16];
    redisReply *r = NULL;
    int rc;
    *n = 0;
    snprintf(cnt, sizeof cnt, "%d", count);
    snprintf(block, sizeof block, "%d", block_ms);
    if (own != NULL) {
        const char *argv[] = {"XREADGROUP", "GROUP",   group,  consumer, "COUNT",
                              cnt,          "STREAMS", STREAM, own};
        rc = redis_command(9, argv, NULL, &r);
    } else {
        const char *argv[] = {"XREADGROUP", "GROUP", group,     consumer, "COUNT", cnt,
                              "BLOCK",      block,   "STREAMS", STREAM,   ">"};
        rc = redis_command_blocking(11, argv, NULL, block_ms, &r);
    }
    if (rc == TD_OK) {
        /* [[stream, [entry, ...]]], or nil when BLOCK timed out. */
        const redisReply *entries = elem(elem(r, 0), 1);
        *n = entries != NULL ? entries->elements : 0;
        rc = each_entry(entries, each, ctx);
    }
    freeReplyObject(r);
    return rc;
}

int stream_claim(const char *group, const char *consumer, int idle_ms, int count,
                 char cursor[STREAM_ID_MAX + 1], stream_entry_fn each, void *ctx)
{
    char idle[16], cnt[16];
    redisReply *r = NULL;
    snprintf(idle, sizeof idle, "%d", idle_ms);
    snprintf(cnt, sizeof cnt, "%d", count);
    const char *argv[] = {"XAUTOCLAIM", STREAM, group, consumer, idle, cursor, "COUNT", cnt};
    int rc = redis_command(8, argv, NULL, &r);
    if (rc != TD_OK)
        return rc;
    const redisReply *next = elem(r, 0);
    rc = each_entry(elem(r, 1), each, ctx);
    bool done = !is_str(next) || strcmp(next->str, "0-0") == 0 || next->len > STREAM_ID_MAX;
    snprintf(cursor, STREAM_ID_MAX + 1, "%s", done ? "0-0" : next->str);
    freeReplyObject(r);
    return rc;
}

int stream_deliveries(const char *group, const char *id, int64_t *count)
{
    redisReply *r = NULL;
    *count = 0;
    const char *argv[] = {"XPENDING", STREAM, group, id, id, "1"};
    int rc = redis_command(6, argv, NULL, &r);
    const redisReply *n = elem(elem(r, 0), 3);
    if (rc == TD_OK && n != NULL && n->type == REDIS_REPLY_INTEGER)
        *count = n->integer;
    freeReplyObject(r);
    return rc;
}

int stream_ack(const char *group, const char *id)
{
    const char *argv[] = {"XACK", STREAM, group, id};
    return stream_command(4, argv);
}

int stream_bury(const char *group, const struct stream_entry *en, int64_t deliveries,
                const char *reason)
{
    char n[24];
    snprintf(n, sizeof n, "%lld", (long long)deliveries);
    const char *argv[22] = {"XADD",       DEAD_STREAM, "MAXLEN", "~",        STREAM_MAXLEN,
                            "*",          "group",     group,    "entry_id", en->id,
                            "deliveries", n,           "reason", reason};
    int argc = 14;
    const char *optional[][2] = {{"outbox_id", en->outbox_id},
                                 {"event_type", en->event_type},
                                 {"biz_key", en->biz_key},
                                 {"payload", en->payload}};
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++) {
        if (optional[i][1] == NULL)
            continue;
        argv[argc++] = optional[i][0];
        argv[argc++] = optional[i][1];
    }
    return stream_command(argc, argv);
}

void stream_leave(const char *group, const char *consumer)
{
    redisReply *r = NULL;
    const char *argv[] = {"XPENDING", STREAM, group, "-", "+", "1", consumer};
    if (redis_command(7, argv, NULL, &r) == TD_OK && r->type == REDIS_REPLY_ARRAY &&
        r->elements == 0) {
        const char *del[] = {"XGROUP", "DELCONSUMER", STREAM, group, consumer};
        (void)stream_command(5, del);
    }
    freeReplyObject(r);
}
