/* respcache.c - the in-process response cache (respcache.h): sharded,
 * bounded, expiring. Apart so that a replay on the loop that read it needs
 * no I/O and no domain code. */
#include "respcache.h"

#include "util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SHARDS 16

struct entry {
    struct entry *next; /* hash chain */
    uint64_t hash;
    int64_t user_id;
    char *key;
    char fingerprint[65];
    int status;
    char *body;
    size_t body_len;
    int64_t expires_ms;
};

/* Each shard: a chained hash table plus a ring of its entries in insertion
 * order, so eviction of the oldest is O(1). */
struct shard {
    pthread_mutex_t mu;
    struct entry **buckets;
    size_t nbuckets;
    struct entry **ring;
    size_t cap, head, count;
};

struct respcache {
    struct shard shards[SHARDS];
};

static uint64_t hash_key(int64_t user_id, const char *key)
{
    /* FNV-1a: fast, and the keys are not attacker-chosen across users. */
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 8; i++) {
        h ^= (uint64_t)(user_id >> (8 * i)) & 0xff;
        h *= 1099511628211ull;
    }
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h ^= *p;
        h *= 1099511628211ull;
    }
    return h;
}

/* The shard is chosen by the hash modulo SHARDS, the bucket by what is
 * left of it. Both by the same low bits would put every entry of a shard
 * in the one bucket in SHARDS whose index matches the shard's, and make
 * the chains SHARDS times longer than the table was sized for. */
static struct shard *shard_of(struct respcache *c, uint64_t h)
{
    return &c->shards[h % SHARDS];
}

static struct entry **bucket_of(struct shard *s, uint64_t h)
{
    return &s->buckets[(h / SHARDS) % s->nbuckets];
}

struct respcache *respcache_new(size_t capacity)
{
    if (capacity == 0)
        return NULL;
    struct respcache *c = xcalloc(1, sizeof *c);
    size_t per = (capacity + SHARDS - 1) / SHARDS;
    for (int i = 0; i < SHARDS; i++) {
        struct shard *s = &c->shards[i];
        pthread_mutex_init(&s->mu, NULL);
        s->cap = per;
        s->nbuckets = per * 2;
        s->buckets = xcalloc(s->nbuckets, sizeof *s->buckets);
        s->ring = xcalloc(per, sizeof *s->ring);
    }
    return c;
}

static void entry_free(struct entry *e)
{
    free(e->key);
    free(e->body);
    free(e);
}

static void unlink_entry(struct shard *s, struct entry *e)
{
    struct entry **pp = bucket_of(s, e->hash);
    while (*pp != NULL && *pp != e)
        pp = &(*pp)->next;
    if (*pp == e)
        *pp = e->next;
}

void respcache_free(struct respcache *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < SHARDS; i++) {
        struct shard *s = &c->shards[i];
        for (size_t k = 0; k < s->count; k++)
            entry_free(s->ring[(s->head + k) % s->cap]);
        free(s->buckets);
        free(s->ring);
        pthread_mutex_destroy(&s->mu);
    }
    free(c);
}

static struct entry *find(struct shard *s, uint64_t h, int64_t user_id, const char *key)
{
    for (struct entry *e = *bucket_of(s, h); e != NULL; e = e->next) {
        if (e->hash == h && e->user_id == user_id && strcmp(e->key, key) == 0)
            return e;
    }
    return NULL;
}

bool respcache_get(struct respcache *c, int64_t user_id, const char *key, int64_t now_ms,
                   struct cached_response *out)
{
    memset(out, 0, sizeof *out);
    if (c == NULL)
        return false;
    uint64_t h = hash_key(user_id, key);
    struct shard *s = shard_of(c, h);
    bool hit = false;
    pthread_mutex_lock(&s->mu);
    struct entry *e = find(s, h, user_id, key);
    if (e != NULL && e->expires_ms > now_ms) {
        memcpy(out->fingerprint, e->fingerprint, sizeof out->fingerprint);
        out->status = e->status;
        out->body = xstrndup(e->body, e->body_len);
        out->body_len = e->body_len;
        hit = true;
    }
    pthread_mutex_unlock(&s->mu);
    return hit;
}

void respcache_put(struct respcache *c, int64_t user_id, const char *key, const char *fingerprint,
                   int status, const char *body, size_t body_len, int64_t now_ms,
                   int64_t expires_ms)
{
    if (c == NULL)
        return;
    uint64_t h = hash_key(user_id, key);
    struct shard *s = shard_of(c, h);
    struct entry *e = xcalloc(1, sizeof *e);
    e->hash = h;
    e->user_id = user_id;
    e->key = xstrdup(key);
    strncpy(e->fingerprint, fingerprint, sizeof e->fingerprint - 1);
    e->status = status;
    e->body = xstrndup(body, body_len);
    e->body_len = body_len;
    e->expires_ms = expires_ms;

    pthread_mutex_lock(&s->mu);
    struct entry *old = find(s, h, user_id, key);
    if (old != NULL && old->expires_ms > now_ms) {
        /* A live entry: a concurrent replay stored the same completed
         * response first. */
        pthread_mutex_unlock(&s->mu);
        entry_free(e);
        return;
    }
    if (old != NULL) {
        /* An expired entry still in the ring: refresh it in place, so the
         * ring keeps one slot per key. */
        free(old->body);
        old->body = e->body;
        old->body_len = e->body_len;
        memcpy(old->fingerprint, e->fingerprint, sizeof old->fingerprint);
        old->status = status;
        old->expires_ms = expires_ms;
        e->body = NULL;
        pthread_mutex_unlock(&s->mu);
        entry_free(e);
        return;
    }
    if (s->count == s->cap) {
        struct entry *oldest = s->ring[s->head];
        unlink_entry(s, oldest);
        entry_free(oldest);
        s->head = (s->head + 1) % s->cap;
        s->count--;
    }
    s->ring[(s->head + s->count) % s->cap] = e;
    s->count++;
    e->next = *bucket_of(s, h);
    *bucket_of(s, h) = e;
    pthread_mutex_unlock(&s->mu);
}

size_t respcache_size(struct respcache *c)
{
    size_t n = 0;
    if (c == NULL)
        return 0;
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_lock(&c->shards[i].mu);
        n += c->shards[i].count;
        pthread_mutex_unlock(&c->shards[i].mu);
    }
    return n;
}

size_t respcache_longest_chain(struct respcache *c)
{
    size_t longest = 0;
    if (c == NULL)
        return 0;
    for (int i = 0; i < SHARDS; i++) {
        struct shard *s = &c->shards[i];
        pthread_mutex_lock(&s->mu);
        for (size_t b = 0; b < s->nbuckets; b++) {
            size_t n = 0;
            for (struct entry *e = s->buckets[b]; e != NULL; e = e->next)
                n++;
            if (n > longest)
                longest = n;
        }
        pthread_mutex_unlock(&s->mu);
    }
    return longest;
}
