/* sentinel.c - the pure parts of following a failover through Redis
 * Sentinel (sentinel.h): the setting, the order of asking, the answer.
 * Apart from redis.c so that they are tested without a Sentinel. */
#include "sentinel.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool parse_port(const char *s, size_t n, int *out)
{
    if (n == 0 || n > 5)
        return false;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v < 1 || v > 65535)
        return false;
    *out = v;
    return true;
}

static bool host_chars_ok(const char *h, size_t n, bool v6)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)h[i];
        if (isalnum(ch) || ch == '.' || ch == '-' || ch == '_' || (v6 && ch == ':'))
            continue;
        return false;
    }
    return n > 0;
}

/* One "host:port" item of n bytes. */
static bool parse_item(const char *s, size_t n, struct sentinel_addr *out, char *err, size_t cap)
{
    const char *host = s, *colon;
    size_t hlen;
    bool v6 = false;
    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (close == NULL || close + 1 >= s + n || close[1] != ':') {
            snprintf(err, cap, "'%.*s': expected [ipv6]:port", (int)n, s);
            return false;
        }
        host = s + 1;
        hlen = (size_t)(close - host);
        colon = close + 1;
        v6 = true;
    } else {
        colon = NULL;
        for (size_t i = 0; i < n; i++)
            if (s[i] == ':')
                colon = s + i;
        if (colon == NULL) {
            snprintf(err, cap, "'%.*s': expected host:port", (int)n, s);
            return false;
        }
        hlen = (size_t)(colon - s);
    }
    if (hlen >= SENTINEL_HOST_MAX || !host_chars_ok(host, hlen, v6)) {
        snprintf(err, cap, "'%.*s': not a host name or address", (int)n, s);
        return false;
    }
    if (!parse_port(colon + 1, (size_t)(s + n - (colon + 1)), &out->port)) {
        snprintf(err, cap, "'%.*s': the port must be 1-65535", (int)n, s);
        return false;
    }
    memcpy(out->host, host, hlen);
    out->host[hlen] = '\0';
    return true;
}

bool sentinel_parse(const char *text, struct sentinel_list *out, char *err, size_t cap)
{
    out->n = 0;
    const char *p = text;
    for (;;) {
        const char *end = strchr(p, ',');
        if (end == NULL)
            end = p + strlen(p);
        const char *a = p, *b = end;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        if (a == b) {
            snprintf(err, cap, "an empty item (expected host:port[,host:port...])");
            return false;
        }
        if (out->n == SENTINEL_MAX) {
            snprintf(err, cap, "more than %d Sentinels", SENTINEL_MAX);
            return false;
        }
        struct sentinel_addr *s = &out->a[out->n];
        if (!parse_item(a, (size_t)(b - a), s, err, cap))
            return false;
        for (int i = 0; i < out->n; i++) {
            if (out->a[i].port == s->port && strcmp(out->a[i].host, s->host) == 0) {
                snprintf(err, cap, "'%.*s' is listed twice", (int)(b - a), a);
                return false;
            }
        }
        out->n++;
        if (*end == '\0')
            return true;
        p = end + 1;
    }
}

bool sentinel_valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (!isalnum(ch) && ch != '.' && ch != '_' && ch != '-')
            return false;
    }
    return true;
}

int sentinel_pick(int preferred, int attempt, int n)
{
    if (n <= 0 || attempt < 0 || attempt >= n)
        return -1;
    if (preferred < 0 || preferred >= n)
        preferred = 0;
    return (preferred + attempt) % n;
}

bool sentinel_read_master(const char *host, const char *port, struct sentinel_addr *out)
{
    if (host == NULL || port == NULL)
        return false;
    size_t hlen = strlen(host);
    if (hlen >= SENTINEL_HOST_MAX || !host_chars_ok(host, hlen, true))
        return false;
    if (!parse_port(port, strlen(port), &out->port))
        return false;
    memcpy(out->host, host, hlen + 1);
    return true;
}

/* The settings' checks: the same wording config_load's own checks use, so
 * that start-up names the setting either way. */
bool sentinel_settings_valid(const char *sentinels, const char *master, char *err, size_t cap)
{
    if (sentinels[0] != '\0') {
        struct sentinel_list list;
        char why[160];
        if (!sentinel_parse(sentinels, &list, why, sizeof why)) {
            snprintf(err, cap, "TICKETD_REDIS_SENTINELS=%s: %s", sentinels, why);
            return false;
        }
        if (master[0] == '\0') {
            snprintf(err, cap,
                     "TICKETD_REDIS_SENTINELS is set but TICKETD_REDIS_MASTER is not: name the "
                     "primary the Sentinels monitor");
            return false;
        }
    } else if (master[0] != '\0') {
        snprintf(err, cap,
                 "TICKETD_REDIS_MASTER=%s: without TICKETD_REDIS_SENTINELS there is no Sentinel "
                 "to ask (a single Redis is TICKETD_REDIS_HOST/TICKETD_REDIS_PORT)",
                 master);
        return false;
    }
    if (master[0] != '\0' && !sentinel_valid_name(master)) {
        snprintf(err, cap, "TICKETD_REDIS_MASTER=%s: expected 1-64 characters of A-Z a-z 0-9 . _ -",
                 master);
        return false;
    }
    return true;
}
