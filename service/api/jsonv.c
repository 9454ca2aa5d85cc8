#include "jsonv.h"

#include "err.h"

#include <stdio.h>
#include <string.h>

/* The top-level member whose value holds byte pos of data, which jansson
 * parsed without error up to there: its name into field (cap bytes), or
 * false when pos is in no member of a top-level object (a bare number, an
 * array, a key) or the name does not fit. */
static bool member_at(const char *data, size_t pos, char *field, size_t cap)
{
    int depth = 0;
    bool top_is_object = false, in_value = false;
    const char *key = NULL;
    size_t key_len = 0;
    for (size_t i = 0; i < pos; i++) {
        char c = data[i];
        if (c == '"') {
            size_t start = i++;
            while (i < pos && data[i] != '"')
                i += data[i] == '\\' ? 2 : 1;
            if (depth == 1 && top_is_object && !in_value) {
                key = data + start;
                key_len = i + 1 - start;
            }
        } else if (c == '{' || c == '[') {
            if (depth == 0)
                top_is_object = c == '{';
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (depth == 1 && c == ':') {
            in_value = true;
        } else if (depth == 1 && c == ',') {
            in_value = false;
            key = NULL;
        }
    }
    if (depth < 1 || !top_is_object || !in_value || key == NULL)
        return false;
    /* The name as JSON says it, escapes and all: let jansson read it. */
    json_t *name = json_loadb(key, key_len, JSON_DECODE_ANY, NULL);
    const char *text = json_string_value(name);
    bool ok = text != NULL && strlen(text) == json_string_length(name) && strlen(text) < cap;
    if (ok)
        snprintf(field, cap, "%s", text);
    json_decref(name);
    return ok;
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
    json_t *v = json_loadb(data, len, JSON_REJECT_DUPLICATES, &e);
    if (v == NULL) {
        /* 2^63 and 1e309 are JSON numbers that jansson cannot hold and
         * refuses while parsing: to the client they are a value out of
         * range for the member that carries it. */
        if (json_error_code(&e) == json_error_numeric_overflow && field != NULL && e.position > 0 &&
            (size_t)e.position <= len && member_at(data, (size_t)e.position, field, field_cap)) {
            snprintf(why, cap, "%s is out of range", field);
            return NULL;
        }
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
