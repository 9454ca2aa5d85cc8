/* cache_scripts.c - the Lua scripts the Redis cache adapter runs, each
 * one atomic step of a defence (a token spent once, a key's record, lock
 * and token taken together, a marker compared before it is replaced, the
 * Bloom filter's bits and state). Apart from cache_redis.c, the C that
 * builds their keys and arguments and reads their replies, so that each
 * script reads whole, with the contract of its KEYS and ARGV above it. */
#include "cache_scripts.h"

#include "redis.h"

/* Checking and spending in one atomic step, so two requests with one
 * token can never both pass. A token is spent *by an Idempotency-Key*: the
 * value "<user>" becomes "<user>|<key>", so the retries of that key (the
 * same intent, e.g. after a 503) may present it again, and every other key
 * is refused. One SET does both halves: XX writes only a token Redis
 * knows, GET answers what it held, KEEPTTL keeps the token's own expiry
 * (a spent token needs remembering only as long as it could be presented:
 * after that its signature refuses it, ordertoken.h). A value that was
 * not ours to spend (another key's spend, another user's token) is put
 * back at once, inside the script, so no one ever sees it changed.
 * spend(token key, user, "<user>|<key>") returns 1 (spent now), 2 (spent
 * before by this key), 3 (spent by another key, or someone else's) or 0
 * (unknown to Redis). Shared by both scripts that spend a token. */
#define SPEND_LUA                                                                                  \
    "local function spend(k, user, spent)\n"                                                       \
    "  local v = redis.call('SET', k, spent, 'XX', 'KEEPTTL', 'GET')\n"                            \
    "  if v == user then return 1 end\n"                                                           \
    "  if v == spent then return 2 end\n"                                                          \
    "  if v then\n"                                                                                \
    "    redis.call('SET', k, v, 'KEEPTTL')\n"                                                     \
    "    return 3\n"                                                                               \
    "  end\n"                                                                                      \
    "  return 0\n"                                                                                 \
    "end\n"

/* The order-key filter's bits (order_key_filter.c): set_bits(bits key,
 * "p1 p2 ...") sets every position given with BITFIELD, one command for
 * as many bits as fit in one call (Lua's unpack has a limit), instead of
 * one SETBIT per bit. */
#define SET_BITS_LUA                                                                               \
    "local function set_bits(key, list)\n"                                                         \
    "  local a = {}\n"                                                                             \
    "  for p in string.gmatch(list, '%d+') do\n"                                                   \
    "    a[#a + 1] = 'SET'; a[#a + 1] = 'u1'; a[#a + 1] = p; a[#a + 1] = 1\n"                      \
    "    if #a >= 4000 then redis.call('BITFIELD', key, unpack(a)); a = {} end\n"                  \
    "  end\n"                                                                                      \
    "  if #a > 0 then redis.call('BITFIELD', key, unpack(a)) end\n"                                \
    "end\n"

/* The token alone. KEYS: token. ARGV: user, "<user>|<key>". */
static const char token_take_lua[] = SPEND_LUA "return spend(KEYS[1], ARGV[1], ARGV[2])\n";

/* The key's record, then the lock, then the token, then the order-key
 * filter (cache_key_begin): every Redis step before the database in one
 * round trip. SET ... NX GET answers the old value when there was one (and
 * sets nothing).
 * KEYS: idem, lock, token (the lock again when there is no token), the
 * filter's bits.
 * ARGV: marker ('' = only look), marker ttl ms, owner ('' = no lock), lock
 * ttl ms, user ('' = no token), "<user>|<key>", the filter's positions
 * ("p1 p2 ...", '' = none).
 * Returns {1, record}, {2} (locked by another request), or {0, verdict,
 * noted}: verdict is spend's (-1: no token), noted 1 when the filter's bits
 * were set. Marker and lock are then held whatever the token said, and the
 * caller gives them back on a refusal. The bits are set only for a request
 * that goes on to the database (no token, or spent by this key): the
 * filter hears of its key before the order's transaction, and a refusal
 * leaves no bit behind (the filter is there to spare refusals a look-up).
 * The bits key is not in the user's hash slot: with a Redis Cluster this
 * script would need the filter on the user's shard (docs/scaling.md). */
#define BEGIN_LUA                                                                                  \
    "local rec\n"                                                                                  \
    "if ARGV[1] ~= '' then\n"                                                                      \
    "  rec = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')\n"                    \
    "else\n"                                                                                       \
    "  rec = redis.call('GET', KEYS[1])\n"                                                         \
    "end\n"                                                                                        \
    "if rec then return {1, rec} end\n"                                                            \
    "if ARGV[3] ~= '' then\n"                                                                      \
    "  if not redis.call('SET', KEYS[2], ARGV[3], 'NX', 'PX', ARGV[4]) then\n"                     \
    "    if ARGV[1] ~= '' then redis.call('DEL', KEYS[1]) end\n"                                   \
    "    return {2}\n"                                                                             \
    "  end\n"                                                                                      \
    "end\n"                                                                                        \
    "local verdict = -1\n"                                                                         \
    "if ARGV[5] ~= '' then verdict = spend(KEYS[3], ARGV[5], ARGV[6]) end\n"                       \
    "if ARGV[7] ~= '' and verdict ~= 0 and verdict ~= 3 then\n"                                    \
    "  note_bits(KEYS[4], ARGV[7])\n"                                                              \
    "  return {0, verdict, 1}\n"                                                                   \
    "end\n"                                                                                        \
    "return {0, verdict, 0}\n"

/* The filter's bits of a begin that goes on: set at once, alone; in a
 * fold (redis.h, REDIS_FOLD_HEAD), gathered and set by one BITFIELD once
 * every begin of the fold has run, still before any of their orders'
 * transactions, which wait for the fold's reply. */
#define NOTE_BITS_NOW "local function note_bits(key, list) set_bits(key, list) end\n"
#define NOTE_BITS_LATER                                                                            \
    "local bits_key, bits = nil, {}\n"                                                             \
    "local function note_bits(key, list)\n"                                                        \
    "  bits_key = key\n"                                                                           \
    "  bits[#bits + 1] = list\n"                                                                   \
    "end\n"
#define BITS_NOTED "if bits_key then set_bits(bits_key, table.concat(bits, ' ')) end\n"

static const char begin_lua[] = SPEND_LUA SET_BITS_LUA NOTE_BITS_NOW BEGIN_LUA;
static const char begin_fold_lua[] =
    SPEND_LUA SET_BITS_LUA NOTE_BITS_LATER REDIS_FOLD_HEAD BEGIN_LUA REDIS_FOLD_LOOP BITS_NOTED
    "return out\n";

/* The key has ended (completed or released). A waiting copy (Prefer:
 * wait) marks the marker it waits for as watched, "W|" for "P|"
 * (watch_lua), so the end reads whether anyone waits in the same command
 * that replaces or deletes the marker, and announces the end on the key's
 * channel (KEYS[3], keyevents_redis.c) only then: no key of its own to
 * read, set or delete. Anything but our marker standing unwatched (it was
 * watched, it expired, another request took the key) is announced too, so
 * that whoever waits looks again.
 * A complete writes first and compares after: SET ... GET replaces the
 * marker and answers what it held, GETDEL takes the lock and answers
 * whose it was, one command each where reading first costs a third. What
 * was not ours goes back at once, inside the script, so no one ever sees
 * it changed; only its TTL is new (a marker's, a record's or a lock's
 * whole TTL, ARGV), a rare case: a marker or lock outlived by its request.
 * Run twice (cache_missed.c sends an end again), an end finds its own
 * record and no lock of its own, and changes nothing else.
 * KEYS: idem, lock, the key's channel. ARGV: marker ('' = none: the
 * record only where there is nothing), record, record ttl s, owner ('' =
 * no lock), marker ttl ms, lock ttl ms. */
#define COMPLETE_LUA                                                                               \
    CACHE_LUA_SAME_MARKER                                                                          \
    "local told = false\n"                                                                         \
    "if ARGV[1] == '' then\n"                                                                      \
    "  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3], 'NX')\n"                                 \
    "else\n"                                                                                       \
    "  local cur = redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3], 'GET')\n"                    \
    "  told = cur ~= ARGV[1]\n"                                                                    \
    "  if cur and cur ~= ARGV[2] and not same_marker(cur, ARGV[1]) then\n"                         \
    "    if string.sub(cur, 1, 1) == 'D' then\n"                                                   \
    "      redis.call('SET', KEYS[1], cur, 'EX', ARGV[3])\n"                                       \
    "    else\n"                                                                                   \
    "      redis.call('SET', KEYS[1], cur, 'PX', ARGV[5])\n"                                       \
    "    end\n"                                                                                    \
    "  end\n"                                                                                      \
    "end\n"                                                                                        \
    "if ARGV[4] ~= '' then\n"                                                                      \
    "  local l = redis.call('GETDEL', KEYS[2])\n"                                                  \
    "  if l and l ~= ARGV[4] then redis.call('SET', KEYS[2], l, 'PX', ARGV[6]) end\n"              \
    "end\n"                                                                                        \
    "if told then redis.call('PUBLISH', KEYS[3], '1') end\n"                                       \
    "return 1\n"

static const char complete_lua[] = COMPLETE_LUA;
static const char complete_fold_lua[] = REDIS_FOLD_HEAD COMPLETE_LUA REDIS_FOLD_TAIL;

/* Failure: compare-and-delete of marker and lock (a failure's path, so
 * one MGET reads both). KEYS and ARGV as complete_lua's, without the
 * record: idem, lock, the key's channel; marker, owner ('' for one not
 * taken). */
static const char release_lua[] = CACHE_LUA_SAME_MARKER
    "local cur = redis.call('MGET', KEYS[1], KEYS[2])\n"
    "local gone = {}\n"
    "if same_marker(cur[1], ARGV[1]) then gone[#gone + 1] = KEYS[1] end\n"
    "if ARGV[2] ~= '' and cur[2] == ARGV[2] then gone[#gone + 1] = KEYS[2] end\n"
    "if #gone > 0 then redis.call('DEL', unpack(gone)) end\n"
    "if ARGV[1] ~= '' and cur[1] ~= ARGV[1] then redis.call('PUBLISH', KEYS[3], '1') end\n"
    "return 1\n";

/* A waiting copy's look (keyevents_watch). KEYS: idem. ARGV: the marker
 * the copy saw. Returns 1 when the key still holds that marker, now
 * marked watched ("W|", its TTL kept), so that its end is announced;
 * 0 when it holds something else. Look and mark in one step: an end is
 * either announced or seen here. */
static const char watch_lua[] =
    CACHE_LUA_SAME_MARKER "local cur = redis.call('GET', KEYS[1])\n"
                          "if not same_marker(cur, ARGV[1]) then return 0 end\n"
                          "if string.sub(cur, 1, 1) == 'P' then\n"
                          "  redis.call('SET', KEYS[1], 'W' .. string.sub(cur, 2), 'KEEPTTL')\n"
                          "end\n"
                          "return 1\n";

/* A dead request's marker becomes ours, with its lock (free, or still the
 * dead request's), watched if it was: its waiters then hear our end.
 * KEYS: idem, lock. ARGV: stale marker, our marker, marker ttl ms, stale
 * owner, our owner ('' = no lock), lock ttl ms. Returns 1 (ours), 0 (the
 * record changed) or 2 (the lock is another's). */
static const char take_over_lua[] = CACHE_LUA_SAME_MARKER
    "local cur = redis.call('GET', KEYS[1])\n"
    "if not same_marker(cur, ARGV[1]) then return 0 end\n"
    "if ARGV[5] ~= '' then\n"
    "  local l = redis.call('GET', KEYS[2])\n"
    "  if l and l ~= ARGV[4] then return 2 end\n"
    "  redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[6])\n"
    "end\n"
    "redis.call('SET', KEYS[1], string.sub(cur, 1, 1) .. string.sub(ARGV[2], 2), 'PX', ARGV[3])\n"
    "return 1\n";

/* The Bloom filter (cache.h). KEYS: bits, state. ARGV: "m:k:", the
 * positions ("p1 p2 ..."). Returns {trusted, maybe}: the k bits are read
 * by one BITFIELD_RO. */
static const char bloom_check_lua[] =
    "local st = redis.call('GET', KEYS[2])\n"
    "local t = 0\n"
    "if st and string.sub(st, 1, #ARGV[1]) == ARGV[1] and string.sub(st, -2) == ':1' then t = 1 "
    "end\n"
    "local a = {}\n"
    "for p in string.gmatch(ARGV[2], '%d+') do a[#a + 1] = 'GET'; a[#a + 1] = 'u1'; "
    "a[#a + 1] = p end\n"
    "for _, b in ipairs(redis.call('BITFIELD_RO', KEYS[1], unpack(a))) do\n"
    "  if b == 0 then return {t, 0} end\n"
    "end\n"
    "return {t, 1}\n";

/* KEYS: bits. ARGV: the positions ("p1 p2 ..."), any number of them. */
static const char bloom_add_lua[] = SET_BITS_LUA "set_bits(KEYS[1], ARGV[1])\n"
                                                 "return 1\n";

/* KEYS: bits, state. ARGV: building state, ttl ms. */
static const char bloom_begin_lua[] = "if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end\n"
                                      "redis.call('DEL', KEYS[1])\n"
                                      "redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])\n"
                                      "return 1\n";

/* KEYS: state. ARGV: building state, ttl ms, complete state ('': renew). */
static const char bloom_progress_lua[] =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "if ARGV[3] == '' then redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "else redis.call('SET', KEYS[1], ARGV[3]) end\n"
    "return 1\n";

struct redis_script cache_lua_bloom_check = {bloom_check_lua, "", NULL};
struct redis_script cache_lua_bloom_add = {bloom_add_lua, "", NULL};
struct redis_script cache_lua_bloom_begin = {bloom_begin_lua, "", NULL};
struct redis_script cache_lua_bloom_progress = {bloom_progress_lua, "", NULL};
static struct redis_script begin_fold = {begin_fold_lua, "", NULL};
struct redis_script cache_lua_begin = {begin_lua, "", &begin_fold};
struct redis_script cache_lua_take_over = {take_over_lua, "", NULL};
struct redis_script cache_lua_token_take = {token_take_lua, "", NULL};
static struct redis_script complete_fold = {complete_fold_lua, "", NULL};
struct redis_script cache_lua_complete = {complete_lua, "", &complete_fold};
struct redis_script cache_lua_release = {release_lua, "", NULL};
struct redis_script cache_lua_watch = {watch_lua, "", NULL};

void cache_scripts_prepare(void)
{
    redis_script_prepare(&cache_lua_bloom_check);
    redis_script_prepare(&cache_lua_bloom_add);
    redis_script_prepare(&cache_lua_bloom_begin);
    redis_script_prepare(&cache_lua_bloom_progress);
    redis_script_prepare(&cache_lua_begin);
    redis_script_prepare(&cache_lua_take_over);
    redis_script_prepare(&cache_lua_token_take);
    redis_script_prepare(&cache_lua_complete);
    redis_script_prepare(&cache_lua_release);
    redis_script_prepare(&cache_lua_watch);
}
