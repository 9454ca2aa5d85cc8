/* prefer.c - reading wait=N from a Prefer header (prefer.h). */
#include "prefer.h"

#include <stdbool.h>
#include <strings.h>

/* RFC 9110 tchar. */
static bool is_tchar(char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
        return true;
    default:
        return false;
    }
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* A cursor over the header's bytes. */
struct scan {
    const char *s;
    size_t len, at;
};

static void skip_ows(struct scan *sc)
{
    while (sc->at < sc->len && is_ows(sc->s[sc->at]))
        sc->at++;
}

/* A token at the cursor: its start and length (0 when there is none). */
static size_t take_token(struct scan *sc, const char **start)
{
    *start = sc->s + sc->at;
    size_t from = sc->at;
    while (sc->at < sc->len && is_tchar(sc->s[sc->at]))
        sc->at++;
    return sc->at - from;
}

/* A quoted string at the cursor (on its opening quote): its content, with
 * quoted pairs kept as written, in [*start, *start + *n). False when it
 * does not close. */
static bool take_quoted(struct scan *sc, const char **start, size_t *n)
{
    sc->at++; /* the opening quote */
    *start = sc->s + sc->at;
    size_t from = sc->at;
    while (sc->at < sc->len && sc->s[sc->at] != '"') {
        if (sc->s[sc->at] == '\\')
            sc->at++;
        sc->at++;
    }
    if (sc->at >= sc->len)
        return false;
    *n = sc->at - from;
    sc->at++; /* the closing quote */
    return true;
}

/* The value of wait: 1*DIGIT, saturated above max_s; -1 when malformed. */
static int wait_value(const char *v, size_t n, int max_s)
{
    long long secs = 0;
    if (n == 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        if (secs <= max_s)
            secs = secs * 10 + (v[i] - '0');
    }
    return secs > max_s ? max_s : (int)secs;
}

/* Skips what is left of a broken element, to the next ',' or ';' outside a
 * quoted string. */
static void skip_element(struct scan *sc)
{
    bool quoted = false;
    while (sc->at < sc->len) {
        char c = sc->s[sc->at];
        if (quoted && c == '\\') {
            sc->at += 2;
            continue;
        }
        if (c == '"')
            quoted = !quoted;
        else if (!quoted && (c == ',' || c == ';'))
            return;
        sc->at++;
    }
}

int prefer_wait_s(const char *value, size_t len, int max_s)
{
    struct scan sc = {value, len, 0};
    if (value == NULL || max_s < 1)
        return 0;
    while (sc.at < sc.len) {
        const char *name, *v = NULL;
        size_t vn = 0;
        bool ok = true;
        skip_ows(&sc);
        size_t nn = take_token(&sc, &name);
        skip_ows(&sc);
        if (sc.at < sc.len && sc.s[sc.at] == '=') {
            sc.at++;
            skip_ows(&sc);
            if (sc.at < sc.len && sc.s[sc.at] == '"')
                ok = take_quoted(&sc, &v, &vn);
            else
                vn = take_token(&sc, &v);
            skip_ows(&sc);
        }
        if (sc.at < sc.len && sc.s[sc.at] != ',' && sc.s[sc.at] != ';')
            ok = false; /* something no element may hold */
        if (ok && nn == 4 && strncasecmp(name, "wait", 4) == 0) {
            /* The first wait decides, valid or not. */
            int n = v != NULL ? wait_value(v, vn, max_s) : -1;
            return n > 0 ? n : 0;
        }
        skip_element(&sc);
        if (sc.at < sc.len)
            sc.at++; /* the separator */
    }
    return 0;
}
