/* fuzz_json_depth.c - the nesting bound every request body meets before it
 * is parsed (jsonv_too_deep, jsonv_depth_ok in jsonv.c).
 *
 * Input: one byte, the depth allowed (0..63), then the body. Invariants:
 * the scanner answers an offset within the body, at a '{' or '[' when it
 * finds one too deep, and nothing too deep before it; on a body jansson
 * accepts, the scanner finds one too deep exactly when the parsed value
 * nests deeper than the bound (strings, escapes and all: the scanner never
 * counts a bracket that is text); a refusal says why and names at most a
 * member of an object; and jsonv_parse_body never accepts a body deeper
 * than JSONV_MAX_DEPTH. */
#include "fuzz.h"

#include "jsonv.h"

#include <jansson.h>
#include <stdbool.h>

/* The largest input worth trying: past JSONV_MAX_DEPTH's bodies, well
 * within jansson's own 2,048 levels (fuzz.mk reads it for -max_len). */
#define FUZZ_MAX_LEN 4096

/* How deep v nests: 0 for a scalar, 1 for [] or {}, one more per level. */
static int depth_of(const json_t *v)
{
    int most = 0;
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            int d = depth_of(json_array_get(v, i));
            most = d > most ? d : most;
        }
        return most + 1;
    }
    if (json_is_object(v)) {
        const char *key;
        const json_t *member;
        json_object_foreach((json_t *)v, key, member)
        {
            int d = depth_of(member);
            most = d > most ? d : most;
        }
        return most + 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int max = data[0] % 64;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;

    size_t at = jsonv_too_deep(body, len, max);
    CHECK(at <= len);
    if (at < len) {
        CHECK(body[at] == '{' || body[at] == '[');
        /* The first one too deep: none before it, and the prefix that ends
         * with it is too deep at the same byte. */
        CHECK(jsonv_too_deep(body, at, max) == at);
        CHECK(jsonv_too_deep(body, at + 1, max) == at);
    }

    json_t *v = json_loadb(body, len, JSON_DECODE_ANY, NULL);
    if (v != NULL) {
        CHECK((at < len) == (depth_of(v) > max));
        json_decref(v);
    }

    char field[65], why[200];
    memset(field, 'x', sizeof field);
    why[0] = '\0';
    bool ok = jsonv_depth_ok(body, len, field, sizeof field, why, sizeof why);
    CHECK(ok == (jsonv_too_deep(body, len, JSONV_MAX_DEPTH) == len));
    if (!ok) {
        CHECK(why[0] != '\0');
        CHECK(memchr(field, '\0', sizeof field) != NULL);
        if (field[0] != '\0') {
            /* A member is named only in a body that is an object. */
            size_t i = 0;
            while (i < len &&
                   (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r'))
                i++;
            CHECK(i < len && body[i] == '{');
        }
        json_t *o = jsonv_parse_body(body, len, field, sizeof field, why, sizeof why);
        CHECK(o == NULL);
    }
    return 0;
}
