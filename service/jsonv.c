#include "jsonv.h"

#include "err.h"

#include <stdio.h>
#include <string.h>

json_t *jsonv_parse_object(const char *data, size_t len, char *why, size_t cap)
{
    json_error_t e;
    json_t *v = json_loadb(data, len, JSON_REJECT_DUPLICATES, &e);
    if (v == NULL) {
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

int jsonv_int(const json_t *obj, const char *field, int64_t min, int64_t max, int64_t *out,
              char *why, size_t cap)
{
    const json_t *v = json_object_get(obj, field);
    if (v == NULL) {
        snprintf(why, cap, "%s is required", field);
        return TD_EINVAL;
    }
    if (!json_is_integer(v)) {
        snprintf(why, cap, "%s must be an integer", field);
        return TD_EINVAL;
    }
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
    const json_t *v = json_object_get(obj, field);
    if (v == NULL) {
        snprintf(why, cap, "%s is required", field);
        return TD_EINVAL;
    }
    if (!json_is_string(v)) {
        snprintf(why, cap, "%s must be a string", field);
        return TD_EINVAL;
    }
    size_t n = json_string_length(v);
    if (n == 0 || n > max_len || strlen(json_string_value(v)) != n) {
        snprintf(why, cap, "%s must be 1 to %zu characters", field, max_len);
        return TD_EINVAL;
    }
    *out = json_string_value(v);
    return TD_OK;
}
