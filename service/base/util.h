/* util.h - small helpers every module uses: allocation that aborts on
 * out-of-memory, randomness, encodings, clocks.
 *
 * Allocation failure is not an error ticketd can serve around, so the x*
 * wrappers log and abort instead of returning NULL (as Redis's zmalloc
 * does); callers never check them. Thread-safe. */
#ifndef TICKETD_UTIL_H
#define TICKETD_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t n);
void *xrealloc(void *p, size_t n);
/* True when s is 1 to max characters, each a letter, a digit or one of
 * . _ : - : an id a client sent that is safe in logs, headers and keys. */
bool id_chars_ok(const char *s, size_t max);
/* For lfind(3) over a table whose rows begin with their name (a const
 * char *): key points at the name looked for. */
int name_first_cmp(const void *key, const void *row);
/* The calling thread's object under key: n zeroed bytes allocated at its
 * first call on this thread (the key's destructor frees them). */
void *xthread_object(pthread_key_t key, size_t n);
/* Returns a new copy of s (caller frees). */
char *xstrdup(const char *s);
/* Returns a new copy of the first n bytes of s, NUL-terminated (caller frees). */
char *xstrndup(const char *s, size_t n);
/* Returns a new string formatted like printf (caller frees). */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Fills buf with n bytes from the kernel's CSPRNG. Aborts if it cannot. */
void rand_bytes(void *buf, size_t n);
/* A uniformly random integer in [0, bound). bound > 0. */
uint64_t rand_below(uint64_t bound);

/* Base64url without padding. out must hold b64url_len(n) + 1 bytes. */
size_t b64url_len(size_t n);
void b64url_encode(const unsigned char *in, size_t n, char *out);
/* Decodes n bytes of canonical base64url without padding into out (cap
 * bytes). Returns the decoded length, or -1 for a character outside the
 * alphabet, a length of 4k+1, bits set that the last character cannot
 * carry (two spellings of the same bytes), or too little room. */
long b64url_decode(const char *in, size_t n, unsigned char *out, size_t cap);
/* Lowercase hex. out must hold 2n + 1 bytes. */
void hex_encode(const unsigned char *in, size_t n, char *out);

/* Milliseconds on the monotonic clock, for durations and deadlines. */
int64_t mono_ms(void);
/* Nanoseconds on the monotonic clock. */
int64_t mono_ns(void);
/* Seconds since the epoch on the wall clock. */
int64_t wall_s(void);

/* This process among the instances sharing Redis and the database, as
 * "<host>-<pid>-<tag>" (at most n - 1 bytes): the name a stream consumer
 * or a job lease's holder goes by. The tag is 32 random bits drawn once
 * per process: containers often share a host name and each runs its
 * server as pid 1, and two instances under one name would each take the
 * other's lease for its own. */
void process_name(char *out, size_t n);

/* Parses a whole decimal integer in [min, max]; no sign unless min < 0,
 * no spaces, no leading '+'. Returns true and sets *out on success. */
bool parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

/* Days since 1970-01-01 (UTC, proleptic Gregorian). parse_day reads a whole
 * "YYYY-MM-DD" of a year from 1970 to 9999 and returns true with *day set;
 * format_day writes one as "YYYY-MM-DD" (DAY_LEN characters and a NUL). */
#define DAY_LEN 10
bool parse_day(const char *s, int64_t *day);
void format_day(int64_t day, char out[DAY_LEN + 1]);

/* Compares n bytes in time independent of where they differ. */
bool ct_equal(const void *a, const void *b, size_t n);

#endif
