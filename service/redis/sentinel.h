/* sentinel.h - the pure parts of following a Redis failover through Redis
 * Sentinel: parsing TICKETD_REDIS_SENTINELS, checking a master name, the
 * order in which the Sentinels are asked, and reading the answer to
 * SENTINEL get-master-addr-by-name. No I/O; redis.c does the asking. */
#ifndef TICKETD_SENTINEL_H
#define TICKETD_SENTINEL_H

#include <stdbool.h>
#include <stddef.h>

#define SENTINEL_MAX      16
#define SENTINEL_HOST_MAX 256

struct sentinel_addr {
    char host[SENTINEL_HOST_MAX];
    int port;
};

struct sentinel_list {
    int n;
    struct sentinel_addr a[SENTINEL_MAX];
};

/* Parses "host:port[,host:port...]" (spaces around items allowed; an IPv6
 * address in brackets, "[::1]:26379"). At least one item, at most
 * SENTINEL_MAX, every port 1-65535, no empty item, no duplicate. Returns
 * true, or false with the reason in err. */
bool sentinel_parse(const char *text, struct sentinel_list *out, char *err, size_t cap);

/* A Sentinel master name: 1-64 characters of [A-Za-z0-9._-]. */
bool sentinel_valid_name(const char *name);

/* The Sentinel to ask on the attempt-th try (0-based) of one look-up: the
 * one that answered last (preferred) first, then the others in list order,
 * wrapping; -1 once all n were asked. A Sentinel that is down is thus
 * skipped on the next look-up only after it failed in this one, and the
 * look-up costs at most n connection attempts. */
int sentinel_pick(int preferred, int attempt, int n);

/* Reads the answer to get-master-addr-by-name, given as its two strings
 * (host, port text): true with *out filled when both are sane. */
bool sentinel_read_master(const char *host, const char *port, struct sentinel_addr *out);

/* Checks TICKETD_REDIS_SENTINELS and TICKETD_REDIS_MASTER together: a
 * list needs a master name and a name needs a list; the list as
 * sentinel_parse takes it, the name as sentinel_valid_name. Returns true,
 * or false with the reason, naming the setting, in err. main.c runs it
 * right after config_load, so that config (base/) needs nothing of the
 * Redis adapter. */
bool sentinel_settings_valid(const char *sentinels, const char *master, char *err, size_t cap);

#endif
