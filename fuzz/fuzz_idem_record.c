/* fuzz_idem_record.c - the records kept under an Idempotency-Key in Redis
 * (idem_parse), whose done form carries a response body.
 *
 * Input: a record text, not NUL-terminated (the parser takes a length).
 * Invariants: an accepted record has a lowercase-hex fingerprint, a 2xx
 * status when done and a body inside the text; re-encoding it with
 * idem_marker/idem_done gives the same text back (a watched marker's
 * letter aside). And the other way: a
 * record the encoders write from fuzzed fields parses to those fields. */
#include "fuzz.h"

#include "idem.h"
#include "util.h"

#include <openssl/sha.h>
#include <stdbool.h>

/* The largest input worth trying, a little past the limits the parser
 * enforces (fuzz.mk reads it for -max_len). */
#define FUZZ_MAX_LEN 1024

static void check_fingerprint(const char *fp)
{
    CHECK(strlen(fp) == IDEM_FP_LEN);
    for (int i = 0; i < IDEM_FP_LEN; i++)
        CHECK((fp[i] >= '0' && fp[i] <= '9') || (fp[i] >= 'a' && fp[i] <= 'f'));
}

static void parse_text(const uint8_t *data, size_t size)
{
    /* An exact-size copy, so ASan sees any read past the length. */
    char *text = malloc(size ? size : 1);
    if (text == NULL)
        abort();
    if (size > 0)
        memcpy(text, data, size);
    struct idem_record rec;
    memset(&rec, 0x5a, sizeof rec);
    bool ok = idem_parse(text, size, &rec);
    if (!ok) {
        free(text);
        return;
    }
    check_fingerprint(rec.fingerprint);
    CHECK(rec.done == (text[0] == 'D'));
    CHECK(rec.done || text[0] == 'P' || text[0] == 'W');
    CHECK(memcmp(rec.fingerprint, text + 2, IDEM_FP_LEN) == 0);
    bool has_nul = memchr(text, '\0', size) != NULL;
    if (rec.done) {
        CHECK(rec.status >= 200 && rec.status <= 299);
        CHECK(rec.body >= text && rec.body <= text + size);
        CHECK(rec.body + rec.body_len == text + size);
        if (!has_nul) {
            char *again = idem_done(rec.fingerprint, rec.status, rec.body, rec.body_len);
            CHECK(strlen(again) == size && memcmp(again, text, size) == 0);
            free(again);
        }
    } else {
        CHECK(rec.status == 0 && rec.body == NULL && rec.body_len == 0);
        if (!has_nul) {
            /* idem_marker writes "P|"; a waiting copy's watch turns the
             * letter into 'W' and changes nothing else (idem.h). */
            char *owner = fz_strndup(text + 3 + IDEM_FP_LEN, size - 3 - IDEM_FP_LEN);
            char *again = idem_marker(rec.fingerprint, owner);
            CHECK(strlen(again) == size && again[0] == 'P' &&
                  memcmp(again + 1, text + 1, size - 1) == 0);
            free(again);
            free(owner);
        }
    }
    free(text);
}

/* Encode, then parse: the fingerprint is a hash of the input, the status
 * and body come from the input. */
static void round_trip(const uint8_t *data, size_t size)
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    char fp[IDEM_FP_LEN + 1];
    SHA256(data, size, md);
    hex_encode(md, sizeof md, fp);
    int status = 200 + (size > 0 ? data[0] % 100 : 0);
    /* The body as the service renders it: text without NUL bytes. */
    size_t body_len = size > 1 ? strnlen((const char *)data + 1, size - 1) : 0;
    const char *body = size > 1 ? (const char *)data + 1 : "";

    struct idem_record rec;
    char *done = idem_done(fp, status, body, body_len);
    CHECK(idem_parse(done, strlen(done), &rec));
    CHECK(rec.done && rec.status == status && strcmp(rec.fingerprint, fp) == 0);
    CHECK(rec.body_len == body_len && memcmp(rec.body, body, body_len) == 0);
    free(done);

    char owner[IDEM_OWNER_LEN + 1];
    hex_encode(md, IDEM_OWNER_LEN / 2, owner);
    char *marker = idem_marker(fp, owner);
    CHECK(idem_parse(marker, strlen(marker), &rec));
    CHECK(!rec.done && strcmp(rec.fingerprint, fp) == 0);
    free(marker);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse_text(data, size);
    round_trip(data, size);
    return 0;
}
