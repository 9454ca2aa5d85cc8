/* util.c - the small helpers every module uses (util.h): allocation that
 * aborts, randomness, encodings, clocks, parsing numbers. */
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static void oom(size_t n)
{
    fprintf(stderr, "{\"level\":\"fatal\",\"msg\":\"out of memory allocating %zu bytes\"}\n", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

void *xcalloc(size_t count, size_t n)
{
    void *p = calloc(count ? count : 1, n ? n : 1);
    if (p == NULL)
        oom(count * n);
    return p;
}

bool id_chars_ok(const char *s, size_t max)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        char c = s[n];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok || n == max)
            return false;
    }
    return n >= 1;
}

int name_first_cmp(const void *key, const void *row)
{
    return strcmp(*(const char *const *)key, *(const char *const *)row);
}

void *xthread_object(pthread_key_t key, size_t n)
{
    void *p = pthread_getspecific(key);
    if (p == NULL) {
        p = xcalloc(1, n);
        pthread_setspecific(key, p);
    }
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        oom(n);
    return q;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort();
    char *p = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

static void kernel_random(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "{\"level\":\"fatal\",\"msg\":\"getrandom failed\"}\n");
            abort();
        }
        p += got;
        n -= (size_t)got;
    }
}

/* Small draws (ids, owners, order numbers) come from a per-thread buffer of
 * kernel randomness, refilled 256 bytes at a time: one getrandom(2) per
 * several requests instead of several per request. Bytes are handed out
 * once and wiped as they go; the pool is never shared between threads and
 * ticketd never forks after start. Large draws go straight to the kernel. */
#define RAND_POOL 256

void rand_bytes(void *buf, size_t n)
{
    static _Thread_local unsigned char pool[RAND_POOL];
    static _Thread_local size_t left;
    unsigned char *p = buf;
    if (n > RAND_POOL / 4) {
        kernel_random(buf, n);
        return;
    }
    while (n > 0) {
        if (left == 0) {
            kernel_random(pool, sizeof pool);
            left = sizeof pool;
        }
        size_t take = n < left ? n : left;
        unsigned char *src = pool + (sizeof pool - left);
        memcpy(p, src, take);
        memset(src, 0, take);
        p += take;
        n -= take;
        left -= take;
    }
}

uint64_t rand_below(uint64_t bound)
{
    /* Rejection sampling: drop the top slice that would bias the modulo. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t v;
    do {
        rand_bytes(&v, sizeof v);
    } while (v >= limit);
    return v % bound;
}

size_t b64url_len(size_t n)
{
    return (n * 4 + 2) / 3;
}

/* The base64url alphabet (RFC 4648 §5): a digit's value is its index. */
static const char b64url_digits[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void b64url_encode(const unsigned char *in, size_t n, char *out)
{
    const char *tab = b64url_digits;
    size_t o = 0;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = tab[v >> 18 & 63];
        out[o++] = tab[v >> 12 & 63];
        out[o++] = tab[v >> 6 & 63];
        out[o++] = tab[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = tab[v >> 18 & 63];
        out[o++] = tab[v >> 12 & 63];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[o++] = tab[v >> 18 & 63];
        out[o++] = tab[v >> 12 & 63];
        out[o++] = tab[v >> 6 & 63];
    }
    out[o] = '\0';
}

static int b64url_value(char c)
{
    /* NUL would find the string's end. */
    const char *p = c != '\0' ? strchr(b64url_digits, c) : NULL;
    return p != NULL ? (int)(p - b64url_digits) : -1;
}

long b64url_decode(const char *in, size_t n, unsigned char *out, size_t cap)
{
    if (n % 4 == 1 || n / 4 * 3 + n % 4 * 3 / 4 > cap) /* 2 chars: 1 byte, 3: 2 */
        return -1;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64url_value(in[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6 | (uint32_t)v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    /* The 2 or 4 bits left after the last byte must be zero. */
    if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
        return -1;
    return (long)o;
}

void hex_encode(const unsigned char *in, size_t n, char *out)
{
    static const char tab[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = tab[in[i] >> 4];
        out[2 * i + 1] = tab[in[i] & 15];
    }
    out[2 * n] = '\0';
}

int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t mono_ms(void)
{
    return mono_ns() / 1000000;
}

int64_t wall_s(void)
{
    return (int64_t)time(NULL);
}

static uint32_t process_tag;
static pthread_once_t process_tag_once = PTHREAD_ONCE_INIT;

static void draw_process_tag(void)
{
    rand_bytes(&process_tag, sizeof process_tag);
}

void process_name(char *out, size_t n)
{
    char host[64];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    pthread_once(&process_tag_once, draw_process_tag);
    snprintf(out, n, "%s-%d-%08x", host, (int)getpid(), (unsigned)process_tag);
}

bool parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (s == NULL || *s == '\0')
        return false;
    bool neg = false;
    const char *p = s;
    if (*p == '-') {
        if (min >= 0)
            return false;
        neg = true;
        p++;
    }
    if (*p == '\0')
        return false;
    /* Accumulate as a negative number so INT64_MIN fits. */
    int64_t v = 0;
    for (; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return false;
        int d = *p - '0';
        if (v < (INT64_MIN + d) / 10)
            return false;
        v = v * 10 - d;
    }
    if (!neg) {
        if (v == INT64_MIN)
            return false;
        v = -v;
    }
    if (v < min || v > max)
        return false;
    *out = v;
    return true;
}

bool ct_equal(const void *a, const void *b, size_t n)
{
    const volatile unsigned char *x = a;
    const volatile unsigned char *y = b;
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= x[i] ^ y[i];
    return d == 0;
}

/* Howard Hinnant's days_from_civil and civil_from_days: exact for every
 * Gregorian date, no tables, no time zone. */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

bool parse_day(const char *s, int64_t *day)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    char y[5], m[3], d[3];
    int64_t yy, mm, dd;
    if (s == NULL || strlen(s) != DAY_LEN || s[4] != '-' || s[7] != '-')
        return false;
    memcpy(y, s, 4);
    y[4] = '\0';
    memcpy(m, s + 5, 2);
    m[2] = '\0';
    memcpy(d, s + 8, 2);
    d[2] = '\0';
    if (!parse_i64(y, 1970, 9999, &yy) || !parse_i64(m, 1, 12, &mm) ||
        !parse_i64(d, 1, mdays[mm - 1], &dd))
        return false;
    bool leap = (yy % 4 == 0 && yy % 100 != 0) || yy % 400 == 0;
    if (mm == 2 && dd == 29 && !leap)
        return false;
    *day = days_from_civil(yy, mm, dd);
    return true;
}

void format_day(int64_t day, char out[DAY_LEN + 1])
{
    int64_t z = day + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    /* Days outside 0000-9999 are clamped: no DATE holds them anyway. */
    if (y < 0 || y > 9999) {
        y = y < 0 ? 0 : 9999;
        m = y == 0 ? 1 : 12;
        d = y == 0 ? 1 : 31;
    }
    snprintf(out, DAY_LEN + 1, "%04d-%02d-%02d", (int)y, (int)m, (int)d);
}
