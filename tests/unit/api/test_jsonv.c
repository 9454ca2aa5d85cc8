/* test_jsonv.c - strict request body parsing: one JSON object, no
 * duplicate keys, integers that are JSON integers, bounded strings. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "err.h"
#include "jsonv.h"

#include <stdbool.h>
#include <string.h>

static void test_parse_object_table(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        bool ok;
    } cases[] = {
        {"{}", true},
        {" {\"session_id\": 7, \"quantity\": 2}\n", true},
        {"{\"a\":{\"a\":1}}", true}, /* the same name at another level is no duplicate */
        /* Duplicate keys would let two readers see two different orders. */
        {"{\"quantity\":1,\"quantity\":5}", false},
        {"{\"a\":1,\"b\":2,\"a\":1}", false},
        {"{\"a\":{\"b\":1,\"b\":2}}", false},
        /* Not an object. */
        {"[]", false},
        {"[{\"quantity\":1}]", false},
        {"1", false},
        {"\"quantity\"", false},
        {"null", false},
        {"true", false},
        /* Not JSON. */
        {"", false},
        {" ", false},
        {"{", false},
        {"{\"a\":1,}", false},
        {"{'a':1}", false},
        {"{\"a\":1} {}", false},
        {"{\"a\":1} x", false},
        {"{\"a\":NaN}", false},
        {"{\"a\":\"\\u0000\"}", false}, /* NUL inside a string */
        {"{\"a\":\"\xff\"}", false},    /* not UTF-8 */
        {"{\"a\":9223372036854775808}", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char why[200] = "";
        json_t *o = jsonv_parse_object(cases[i].text, strlen(cases[i].text), why, sizeof why);
        if (cases[i].ok && o == NULL)
            fail_msg("refused %s: %s", cases[i].text, why);
        if (!cases[i].ok && o != NULL)
            fail_msg("accepted %s", cases[i].text);
        if (o != NULL)
            assert_true(json_is_object(o));
        else
            assert_true(strlen(why) > 0);
        json_decref(o);
    }
}

static void test_parse_honours_length(void **state)
{
    (void)state;
    char why[200];
    /* The body is the first len bytes, whatever follows in memory. */
    static const char buf[] = "{\"a\":1}garbage";
    json_t *o = jsonv_parse_object(buf, 7, why, sizeof why);
    assert_non_null(o);
    json_decref(o);
    assert_null(jsonv_parse_object(buf, sizeof buf - 1, why, sizeof why));
    /* A raw NUL byte inside the body is not JSON either. */
    static const char nul[] = "{\"a\":1}\0{}";
    assert_null(jsonv_parse_object(nul, sizeof nul - 1, why, sizeof why));
    static const char nul_in_string[] = "{\"a\":\"x\0y\"}";
    assert_null(jsonv_parse_object(nul_in_string, sizeof nul_in_string - 1, why, sizeof why));
}

static void test_nul_bytes(void **state)
{
    (void)state;
    /* A raw NUL anywhere: not JSON, even where jansson would read past it. */
    static const struct {
        const char *text;
        size_t len;
    } cases[] = {
#define B(s) {s, sizeof s - 1}
        B("{\"session_id\":1,\"quantity\":1\0}"),
        B("{\"session_id\":1\0,\"quantity\":1}"),
        B("{\"a\":1}\0"),
        B("\0{\"a\":1}"),
        B("{\0\"a\":1}"),
        B("{\"a\":true\0}"),
        B("{\"a\":[1\0]}"),
        B("{\"a\":1.5\0}"),
        B("{\"a\":\"x\0\"}"),
        B("{}\0"),
#undef B
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char why[200] = "", field[64] = "x";
        json_t *o =
            jsonv_parse_body(cases[i].text, cases[i].len, field, sizeof field, why, sizeof why);
        if (o != NULL)
            fail_msg("case %zu accepted: %s", i, cases[i].text);
        assert_string_equal(field, ""); /* INVALID_JSON, no field */
        assert_true(strlen(why) > 0);
        assert_null(jsonv_parse_object(cases[i].text, cases[i].len, why, sizeof why));
    }
}

static void test_overflow_names_the_field(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *field; /* NULL: accepted; "": INVALID_JSON */
    } cases[] = {
        /* Integers beyond int64 and reals that overflow are valid JSON
         * numbers: out of range for the member that carries them. */
        {"{\"session_id\":1,\"quantity\":9223372036854775808}", "quantity"},
        {"{\"session_id\":9223372036854775808,\"quantity\":1}", "session_id"},
        {"{\"quantity\":-9223372036854775809}", "quantity"},
        {"{\"quantity\":99999999999999999999999999999}", "quantity"},
        {"{\"quantity\":1e309}", "quantity"},
        {"{\"quantity\":-1e309}", "quantity"},
        {"{\"quantity\":1.5e999}", "quantity"},
        {" { \"quantity\" : 1e309 } ", "quantity"},
        {"{\"txn_id\":\"a,b:{\\\"c\\\"\",\"amount_cents\":9223372036854775808}", "amount_cents"},
        {"{\"quant\\u0069ty\":1e309}", "quantity"},
        /* Deeper: the path of the value, as validation errors name it. */
        {"{\"a\":{\"b\":1e309}}", "a.b"},
        {"{\"a\":[1,2,9223372036854775808]}", "a[2]"},
        {"{\"a\":[{\"x\":1},{\"y\":[1e309]}]}", "a[1].y[0]"},
        {"{\"items\":[{\"key\":\"k\",\"session_id\":9223372036854775808,\"quantity\":1}]}",
         "items[0].session_id"},
        {"{\"items\":[{\"key\":\"a\",\"session_id\":1},{\"quantity\":1,\"session_id\":"
         "-9223372036854775809}]}",
         "items[1].session_id"},
        {"{\"a\":{\"k,\\\"x\":[],\"b\":{\"c\":1e309}}}", "a.b.c"},
        {"{\"a\":[[[[[[[[[[[[[[[[1e309]]]]]]]]]]]]]]]]}", ""}, /* deeper than named */
        {"{\"a\":\"}\",\"b\":1e309}", "b"},
        /* The edges that still fit. */
        {"{\"quantity\":9223372036854775807}", NULL},
        {"{\"quantity\":-9223372036854775808}", NULL},
        {"{\"quantity\":1e308}", NULL},
        {"{\"quantity\":1e-400}", NULL}, /* underflow reads as 0 */
        /* No member to name: INVALID_JSON. */
        {"9223372036854775808", ""},
        {"1e309", ""},
        {"[1e309]", ""},
        {"[{\"quantity\":1e309}]", ""},
        {"{\"\\u0000\":1e309}", ""},
        /* Other errors stay INVALID_JSON. */
        {"{\"quantity\":1,\"quantity\":1e309}", ""},
        {"{\"quantity\":01}", ""},
        {"{\"quantity\":}", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char why[200] = "", field[64] = "untouched";
        json_t *o = jsonv_parse_body(cases[i].text, strlen(cases[i].text), field, sizeof field, why,
                                     sizeof why);
        if (cases[i].field == NULL) {
            if (o == NULL)
                fail_msg("%s refused: %s", cases[i].text, why);
            json_decref(o);
            continue;
        }
        if (o != NULL)
            fail_msg("%s accepted", cases[i].text);
        if (strcmp(field, cases[i].field) != 0)
            fail_msg("%s: field \"%s\", want \"%s\" (%s)", cases[i].text, field, cases[i].field,
                     why);
        if (cases[i].field[0] != '\0')
            assert_non_null(strstr(why, cases[i].field));
    }

    /* A name too long to repeat is not named. */
    char field[8], why[200];
    static const char longname[] = "{\"a_very_long_member_name\":1e309}";
    assert_null(jsonv_parse_body(longname, strlen(longname), field, sizeof field, why, sizeof why));
    assert_string_equal(field, "");
    /* field may be NULL: the plain parse. */
    assert_null(jsonv_parse_body(longname, strlen(longname), NULL, 0, why, sizeof why));
}

/* n opening brackets of kind open, then the closers: nesting n deep, inside
 * {"<name>": ...} when name is not NULL. Into buf (cap bytes). */
static size_t nest(char *buf, size_t cap, const char *name, size_t n, char open)
{
    size_t len = 0;
    char close = open == '[' ? ']' : '}';
    if (name != NULL)
        len += (size_t)snprintf(buf, cap, "{\"%s\":", name);
    for (size_t i = 0; i < n; i++)
        buf[len++] = open;
    for (size_t i = 0; i < n; i++)
        buf[len++] = close;
    if (name != NULL)
        buf[len++] = '}';
    buf[len] = '\0';
    assert_true(len < cap);
    return len;
}

/* jsonv_too_deep counts the brackets outside strings, escapes respected. */
static void test_too_deep_table(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int max;
        size_t want; /* SIZE_MAX: the whole length (not too deep) */
    } cases[] = {
        {"", 1, SIZE_MAX},
        {"{}", 1, SIZE_MAX},
        {"{}", 0, 0},
        {"[[]]", 1, 1},
        {"[[]]", 2, SIZE_MAX},
        {"[][][]", 1, SIZE_MAX}, /* siblings, not depth */
        {"{\"a\":[1,{\"b\":2}]}", 3, SIZE_MAX},
        {"{\"a\":[1,{\"b\":2}]}", 2, 8},
        /* Brackets in strings are text. */
        {"{\"[[[[\":\"{{{{\"}", 1, SIZE_MAX},
        /* An escaped quote does not end the string; an escaped backslash
         * does not escape the quote after it. */
        {"{\"a\\\"[[\":1}", 1, SIZE_MAX},
        {"{\"a\\\\\":[[1]]}", 2, 8},
        /* Stray closers do not make room for more depth. */
        {"]]]][[", 1, 5},
        /* A string left open hides the rest. */
        {"{\"[[[[", 1, SIZE_MAX},
        {"\"\\", 0, SIZE_MAX},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = strlen(cases[i].text);
        size_t want = cases[i].want == SIZE_MAX ? len : cases[i].want;
        size_t got = jsonv_too_deep(cases[i].text, len, cases[i].max);
        if (got != want)
            fail_msg("%s (max %d): %zu, want %zu", cases[i].text, cases[i].max, got, want);
    }
    /* The length is honoured: what lies past it is not read. */
    assert_int_equal(jsonv_too_deep("{}[[", 4, 1), 3);
    assert_int_equal(jsonv_too_deep("{}[[", 2, 1), 2);
}

/* A body nested deeper than JSONV_MAX_DEPTH is refused before it is parsed:
 * VALIDATION_FAILED for the top-level member that holds it, INVALID_JSON
 * when it is no member of an object; JSONV_MAX_DEPTH levels still parse. */
static void test_depth_limit_names_the_field(void **state)
{
    (void)state;
    static char buf[8192];
    char why[200], field[64];
    size_t len;

    /* The object itself is level 1: n more levels below "items". */
    len = nest(buf, sizeof buf, "items", JSONV_MAX_DEPTH - 1, '[');
    json_t *o = jsonv_parse_body(buf, len, field, sizeof field, why, sizeof why);
    if (o == NULL)
        fail_msg("%d levels refused: %s", JSONV_MAX_DEPTH, why);
    json_decref(o);

    len = nest(buf, sizeof buf, "items", JSONV_MAX_DEPTH, '[');
    assert_null(jsonv_parse_body(buf, len, field, sizeof field, why, sizeof why));
    assert_string_equal(field, "items");
    assert_non_null(strstr(why, "deeper than 32 levels"));

    /* About 2,000 levels, the most a 16 KiB body holds with its closers. */
    len = nest(buf, sizeof buf, "session_id", 2000, '{');
    assert_false(jsonv_depth_ok(buf, len, field, sizeof field, why, sizeof why));
    assert_string_equal(field, "session_id");
    assert_null(jsonv_parse_body(buf, len, field, sizeof field, why, sizeof why));
    assert_string_equal(field, "session_id");

    /* The second member is the deep one. */
    static const char second[] =
        "{\"a\":[1],\"b\\u0041\":"
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}";
    assert_false(jsonv_depth_ok(second, strlen(second), field, sizeof field, why, sizeof why));
    assert_string_equal(field, "bA");

    /* No object to name a member of: INVALID_JSON. */
    len = nest(buf, sizeof buf, NULL, 2000, '[');
    assert_false(jsonv_depth_ok(buf, len, field, sizeof field, why, sizeof why));
    assert_string_equal(field, "");
    assert_null(jsonv_parse_body(buf, len, field, sizeof field, why, sizeof why));
    assert_string_equal(field, "");
    /* field may be NULL. */
    assert_false(jsonv_depth_ok(buf, len, NULL, 0, why, sizeof why));
}

static json_t *obj(const char *text)
{
    char why[200];
    json_t *o = jsonv_parse_object(text, strlen(text), why, sizeof why);
    if (o == NULL)
        fail_msg("test body does not parse: %s", why);
    return o;
}

static void test_int_table(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int64_t min, max;
        bool ok;
        int64_t want;
    } cases[] = {
        {"{\"quantity\":1}", 1, 6, true, 1},
        {"{\"quantity\":6}", 1, 6, true, 6},
        {"{\"quantity\":0}", 1, 6, false, 0},
        {"{\"quantity\":7}", 1, 6, false, 0},
        {"{\"quantity\":-1}", 1, 6, false, 0},
        {"{\"quantity\":-1}", -5, 6, true, -1},
        {"{\"quantity\":9007199254740991}", 1, 9007199254740991, true, 9007199254740991},
        {"{\"quantity\":9007199254740992}", 1, 9007199254740991, false, 0},
        {"{\"quantity\":-9223372036854775808}", INT64_MIN, 0, true, INT64_MIN},
        /* jansson reads these as reals; an amount must not be ambiguous. */
        {"{\"quantity\":2.0}", 1, 6, false, 0},
        {"{\"quantity\":1e3}", 1, 10000, false, 0},
        {"{\"quantity\":1E0}", 1, 6, false, 0},
        {"{\"quantity\":2.5}", 1, 6, false, 0},
        {"{\"quantity\":-0.0}", -1, 6, false, 0},
        /* Other types. */
        {"{\"quantity\":\"2\"}", 1, 6, false, 0},
        {"{\"quantity\":true}", 0, 6, false, 0},
        {"{\"quantity\":null}", 0, 6, false, 0},
        {"{\"quantity\":[2]}", 0, 6, false, 0},
        {"{\"quantity\":{}}", 0, 6, false, 0},
        /* Missing, or under another name. */
        {"{}", 0, 6, false, 0},
        {"{\"Quantity\":2}", 0, 6, false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *o = obj(cases[i].text);
        char why[200] = "";
        int64_t out = 12345;
        int rc = jsonv_int(o, "quantity", cases[i].min, cases[i].max, &out, why, sizeof why);
        if (cases[i].ok) {
            if (rc != TD_OK)
                fail_msg("%s refused: %s", cases[i].text, why);
            assert_int_equal(out, cases[i].want);
        } else {
            if (rc != TD_EINVAL)
                fail_msg("%s accepted", cases[i].text);
            /* The reason names the field; *out is untouched. */
            assert_non_null(strstr(why, "quantity"));
            assert_int_equal(out, 12345);
        }
        json_decref(o);
    }
}

static void test_string_table(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t max;
        bool ok;
        const char *want;
    } cases[] = {
        {"{\"title\":\"a\"}", 4, true, "a"},
        {"{\"title\":\"abcd\"}", 4, true, "abcd"},
        {"{\"title\":\"abcde\"}", 4, false, NULL},
        {"{\"title\":\"\"}", 4, false, NULL},
        /* The bound is in bytes: "é" is two. */
        {"{\"title\":\"\xc3\xa9\xc3\xa9\"}", 4, true, "\xc3\xa9\xc3\xa9"},
        {"{\"title\":\"\xc3\xa9\xc3\xa9\xc3\xa9\"}", 4, false, NULL},
        {"{\"title\":1}", 4, false, NULL},
        {"{\"title\":null}", 4, false, NULL},
        {"{\"title\":[\"a\"]}", 4, false, NULL},
        {"{}", 4, false, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *o = obj(cases[i].text);
        char why[200] = "";
        const char *out = "untouched";
        int rc = jsonv_string(o, "title", cases[i].max, &out, why, sizeof why);
        if (cases[i].ok) {
            if (rc != TD_OK)
                fail_msg("%s refused: %s", cases[i].text, why);
            assert_string_equal(out, cases[i].want);
        } else {
            if (rc != TD_EINVAL)
                fail_msg("%s accepted", cases[i].text);
            assert_string_equal(out, "untouched");
            assert_non_null(strstr(why, "title"));
        }
        json_decref(o);
    }
}

static void test_string_with_embedded_nul(void **state)
{
    (void)state;
    /* The parser refuses \u0000, but an object built in code may hold one;
     * a C string cut short at the NUL would be a different value. */
    json_t *o = json_object();
    json_object_set_new(o, "s", json_stringn("ab\0cd", 5));
    char why[200];
    const char *out = NULL;
    assert_int_equal(jsonv_string(o, "s", 64, &out, why, sizeof why), TD_EINVAL);
    assert_null(out);
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_object_table),
        cmocka_unit_test(test_parse_honours_length),
        cmocka_unit_test(test_nul_bytes),
        cmocka_unit_test(test_overflow_names_the_field),
        cmocka_unit_test(test_too_deep_table),
        cmocka_unit_test(test_depth_limit_names_the_field),
        cmocka_unit_test(test_int_table),
        cmocka_unit_test(test_string_table),
        cmocka_unit_test(test_string_with_embedded_nul),

    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
