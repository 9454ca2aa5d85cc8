/* jsonv.c - the strict reading of request bodies (jsonv.h): no duplicate
 * keys, integers that are JSON integers. One place, so that no handler
 * reads a body more leniently than another. */
#include "jsonv.h"

#include "err.h"

#include <stdio.h>
#include <string.h>

/* How deep a number's path is followed; a deeper one is not named. */
#define PATH_DEPTH 16

/* One object or array that is open at the byte looked at. */
struct open_value {
    bool object;
    bool in_value;   /* object: after the current member's colon */
    const char *key; /* object: the current member's name, quotes included */
    size_t key_len;
    size_t index; /* array: the current element */
};

/* Appends one member name, as JSON spells it (escapes and all; jansson
 * reads it), to the path in field. False when it has a NUL or no room. */
static bool path_name(const char *key, size_t key_len, bool dot, char *field, size_t cap)
{
    json_t *name = json_loadb(key, key_len, JSON_DECODE_ANY, NULL);
    const char *text = json_string_value(name);
    size_t used = strlen(field);
    bool ok = text != NULL && strlen(text) == json_string_length(name) &&
              used + (dot ? 1 : 0) + strlen(text) < cap;
    if (ok)
        snprintf(field + used, cap - used, "%s%s", dot ? "." : "", text);
    json_decref(name);
    return ok;
}

/* The path of the value that holds byte pos of data, which jansson parsed
 * without error up to there, into field (cap bytes): the top-level member's
 * name, then ".name" for a member and "[i]" for an element of what it
 * holds (items[0].session_id), as validation errors name fields. False when
 * pos is in no member of a top-level object (a bare number, an array, a
 * key), lies deeper than PATH_DEPTH, or the path does not fit. */
static bool path_at(const char *data, size_t pos, char *field, size_t cap)
{
    struct open_value open[PATH_DEPTH];
    int depth = 0;
    for (size_t i = 0; i < pos; i++) {
        char c = data[i];
        struct open_value *top = depth > 0 ? &open[depth - 1] : NULL;
        if (c == '"') {
            size_t start = i++;
            while (i < pos && data[i] != '"')
                i += data[i] == '\\' ? 2 : 1;
            if (top != NULL && top->object && !top->in_value) {
                top->key = data + start;
                top->key_len = i + 1 - start;
            }
        } else if (c == '{' || c == '[') {
            if (depth == PATH_DEPTH)
                return false;
            open[depth++] = (struct open_value){.object = c == '{'};
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (top != NULL && c == ':') {
            top->in_value = true;
        } else if (top != NULL && c == ',') {
            top->in_value = false;
            top->key = NULL;
            top->index++;
        }
    }
    if (depth < 1 || !open[0].object)
        return false;
    field[0] = '\0';
    for (int d = 0; d < depth; d++) {
        const struct open_value *v = &open[d];
        size_t used = strlen(field);
        if (!v->object) {
            int n = snprintf(field + used, cap - used, "[%zu]", v->index);
            if (n < 0 || (size_t)n >= cap - used)
                return false;
        } else if (!v->in_value || v->key == NULL ||
                   !path_name(v->key, v->key_len, d > 0, field, cap)) {
            return false;
        }
    }
    return true;
}

size_t jsonv_too_deep(const char *data, size_t len, int max_depth)
{
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char c = data[i];
        if (in_string) {
            if (c == '\\')
                i++; /* the escaped byte, whatever it is */
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            if (++depth > max_depth)
                return i;
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--; /* a stray closer is jansson's to refuse */
        }
    }
    return len;
}

/* The name of the top-level member whose value holds byte pos, into field
 * (cap bytes), for a body that is an object still open at pos: the last
 * string at level 1 before the value at level 2 that pos lies in is that
 * value's key. False when the body is no such object, or the name does
 * not fit or read (path_name). */
static bool top_member_name(const char *data, size_t pos, char *field, size_t cap)
{
    size_t i = 0, key = 0, key_len = 0, member = 0, member_len = 0;
    int depth = 0;
    while (i < pos && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r'))
        i++;
    if (i >= pos || data[i] != '{')
        return false;
    for (; i < pos; i++) {
        char c = data[i];
        if (c == '"') {
            size_t start = i++;
            while (i < pos && data[i] != '"')
                i += data[i] == '\\' ? 2 : 1;
            if (depth == 1) {
                key = start;
                key_len = i + 1 - start;
            }
        } else if (c == '{' || c == '[') {
            if (++depth == 2) {
                member = key;
                member_len = key_len;
            }
        } else if (c == '}' || c == ']') {
            if (--depth == 0)
                return false; /* the object ended: pos lies after it */
        }
    }
    field[0] = '\0';
    return member_len > 0 && depth >= 2 && path_name(data + member, member_len, false, field, cap);
}

bool jsonv_depth_ok(const char *data, size_t len, char *field, size_t field_cap, char *why,
                    size_t cap)
{
    size_t at = jsonv_too_deep(data, len, JSONV_MAX_DEPTH);
    if (at == len)
        return true;
    snprintf(why, cap, "objects and arrays nest deeper than %d levels", JSONV_MAX_DEPTH);
    if (field != NULL && field_cap > 0) {
        /* Named by its top-level member, as far as the body is an object
         * up to there: the path to the deep value itself is as long as
         * the nesting. */
        if (!top_member_name(data, at, field, field_cap))
            field[0] = '\0';
    }
    return false;
}

json_t *jsonv_parse_body(const char *data, size_t len, char *field, size_t field_cap, char *why,
                         size_t cap)
{
    json_error_t e;
    if (field != NULL && field_cap > 0)
        field[0] = '\0';
    /* jansson's reader skips a NUL byte it has put back, so "1\0}" read as
     * "1}": a body with a NUL anywhere is not JSON, whatever it parses as. */
    if (memchr(data, '\0', len) != NULL) {
        snprintf(why, cap, "the body contains a NUL byte");
        return NULL;
    }
    if (!jsonv_depth_ok(data, len, field, field_cap, why, cap))
        return NULL;
    json_t *v = json_loadb(data, len, JSON_REJECT_DUPLICATES, &e);
    if (v == NULL) {
        /* 2^63 and 1e309 are JSON numbers that jansson cannot hold and
         * refuses while parsing: to the client they are a value out of
         * range for the member that carries it. */
        if (json_error_code(&e) == json_error_numeric_overflow && field != NULL && e.position > 0 &&
            (size_t)e.position <= len && path_at(data, (size_t)e.position, field, field_cap)) {
            snprintf(why, cap, "%s is out of range", field);
            return NULL;
        }
        if (field != NULL && field_cap > 0)
            field[0] = '\0'; /* path_at may have begun a path it could not finish */
        snprintf(why, cap, "%s at line %d, column %d", e.text, e.line, e.column);
        return NULL;
    }
    if (!json_is_object(v)) {
        snprintf(why, cap, "the body must be a JSON object");
        json_decref(v);
        return NULL;
    }
    return v;
}

json_t *jsonv_parse_object(const char *data, size_t len, char *why, size_t cap)
{
    return jsonv_parse_body(data, len, NULL, 0, why, cap);
}

/* obj's member field when it is there and of type (what names the type),
 * or NULL after saying why into why. */
static const json_t *member(const json_t *obj, const char *field, json_type type, const char *what,
                            char *why, size_t cap)
{
    const json_t *v = json_object_get(obj, field);
    if (v == NULL)
        snprintf(why, cap, "%s is required", field);
    else if (json_typeof(v) != type)
        snprintf(why, cap, "%s must be %s", field, what);
    else
        return v;
    return NULL;
}

int jsonv_int(const json_t *obj, const char *field, int64_t min, int64_t max, int64_t *out,
              char *why, size_t cap)
{
    const json_t *v = member(obj, field, JSON_INTEGER, "an integer", why, cap);
    if (v == NULL)
        return TD_EINVAL;
    json_int_t i = json_integer_value(v);
    if (i < min || i > max) {
        snprintf(why, cap, "%s must be from %lld to %lld", field, (long long)min, (long long)max);
        return TD_EINVAL;
    }
    *out = (int64_t)i;
    return TD_OK;
}

int jsonv_string(const json_t *obj, const char *field, size_t max_len, const char **out, char *why,
                 size_t cap)
{
    const json_t *v = member(obj, field, JSON_STRING, "a string", why, cap);
    if (v == NULL)
        return TD_EINVAL;
    size_t n = json_string_length(v);
    if (n == 0 || n > max_len || strlen(json_string_value(v)) != n) {
        snprintf(why, cap, "%s must be 1 to %zu characters", field, max_len);
        return TD_EINVAL;
    }
    *out = json_string_value(v);
    return TD_OK;
}
