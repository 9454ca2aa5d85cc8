/* envfile.c - env files (envfile.h): the file's bytes, and its
 * KEY=VALUE lines by Compose's env_file rules. */
#include "envfile.h"

#include "err.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* Reads a value the way Compose reads an env_file, in place: unquoted up to
 * an inline " #" comment; 'single' quotes literal; "double" quotes with \n,
 * \t, \\ and \" escapes; after a closing quote only a comment may follow. */
static int env_value(char *raw, char **out, char *why, size_t cap)
{
    char q = raw[0];
    *out = raw;
    if (q != '"' && q != '\'') {
        for (char *p = raw; *p != '\0'; p++) {
            if (*p == '#' && p > raw && (p[-1] == ' ' || p[-1] == '\t')) {
                *p = '\0';
                break;
            }
        }
        *out = trim(raw);
        return TD_OK;
    }
    char *w = raw; /* unescaped text is written over the quoted text */
    char *p = raw + 1;
    for (; *p != '\0' && *p != q; p++) {
        if (q == '"' && *p == '\\' && p[1] != '\0') {
            p++;
            *w++ = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
        } else {
            *w++ = *p;
        }
    }
    if (*p != q) {
        snprintf(why, cap, "unterminated quote");
        return TD_EINVAL;
    }
    char *rest = trim(p + 1);
    if (*rest != '\0' && *rest != '#') {
        snprintf(why, cap, "unexpected text after the closing quote");
        return TD_EINVAL;
    }
    *w = '\0';
    return TD_OK;
}

int envfile_walk(const char *text, const char *origin, envfile_fn each, void *ctx, char *err,
                 size_t cap)
{
    int rc = TD_OK;
    char *copy = xstrdup(text);
    int lineno = 0;
    /* strtok_r would skip empty lines and so miscount; walk lines by hand. */
    char *line = copy;
    while (line != NULL) {
        char *next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        lineno++;
        char *l = trim(line);
        line = next;
        if (*l == '\0' || *l == '#')
            continue;
        char *eq = strchr(l, '=');
        if (eq == NULL) {
            snprintf(err, cap, "%s:%d: expected KEY=VALUE", origin, lineno);
            rc = TD_EINVAL;
            goto out;
        }
        *eq = '\0';
        char *key = trim(l);
        if (*key == '\0') {
            snprintf(err, cap, "%s:%d: expected KEY=VALUE, not an empty KEY", origin, lineno);
            rc = TD_EINVAL;
            goto out;
        }
        char *value;
        char why[256];
        if (env_value(trim(eq + 1), &value, why, sizeof why) != TD_OK) {
            snprintf(err, cap, "%s:%d: %s: %s", origin, lineno, key, why);
            rc = TD_EINVAL;
            goto out;
        }
        char where[300];
        snprintf(where, sizeof where, "%s:%d", origin, lineno);
        if (each(key, value, where, ctx, why, sizeof why) != TD_OK) {
            snprintf(err, cap, "%s: %s", where, why);
            rc = TD_EINVAL;
            goto out;
        }
    }
out:
    free(copy);
    return rc;
}

int envfile_read(const char *path, char **out)
{
    int rc = TD_EINVAL;
    char *buf = NULL;
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        goto out;
    size_t len = 0, cap = 4096;
    buf = xmalloc(cap);
    for (;;) {
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
        if (len + 1 == cap) {
            if (cap >= (1u << 20))
                goto out; /* a config file is not a megabyte */
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
    }
    if (ferror(f))
        goto out;
    buf[len] = '\0';
    *out = buf;
    buf = NULL;
    rc = TD_OK;
out:
    if (f != NULL)
        fclose(f);
    free(buf);
    return rc;
}
