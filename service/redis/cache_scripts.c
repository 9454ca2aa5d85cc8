/* cache_scripts.c - the Lua scripts the Redis cache adapter runs, each
 * one atomic step of a defence (a token spent once, a key's record, lock
 * and token taken together, a marker compared before it is replaced, the
 * Bloom filter's bits and state). Apart from cache_redis.c, the C that
 * builds their keys and arguments and reads their replies, so that each
 * script reads whole, with the contract of its KEYS and ARGV above it. */
#include "cache_scripts.h"

#include "redis.h"

/* GET == user, then spend: checking and spending in one atomic step, so
 * two requests with one token can never both pass. A token is spent *by an
 * Idempotency-Key*: the value becomes "<user>|<key>", so the retries of
 * that key (the same intent, e.g. after a 503) may present it again, and
 * every other key is refused. spend(token key, user, "<user>|<key>", ttl s)
 * returns 1 (spent now), 2 (spent before by this key), 3 (spent by another
 * key, or someone else's) or 0 (unknown to Redis). Shared by both scripts
 * that spend a token. */
#define SPEND_LUA                                                                                  \
    "local function spend(k, user, spent, ttl)\n"                                                  \
    "  local v = redis.call('GET', k)\n"                                                           \
    "  if v == user then\n"                                                                        \
    "    redis.call('SET', k, spent, 'EX', ttl)\n"                                                 \
    "    return 1\n"                                                                               \
    "  end\n"                                                                                      \
    "  if v == spent then return 2 end\n"                                                          \
    "  if v then return 3 end\n"                                                                   \
    "  return 0\n"                                                                                 \
    "end\n"

/* The token alone. KEYS: token. ARGV: user, "<user>|<key>", ttl s. */
static const char token_take_lua[] = SPEND_LUA "return spend(KEYS[1], ARGV[1], ARGV[2], ARGV[3])\n";

/* The key's record, then the lock, then the token (cache_key_begin):
 * every Redis defence before the database in one round trip. SET ... NX
 * GET answers the old value when there was one (and sets nothing).
 * KEYS: idem, lock, token (the lock again when there is no token).
 * ARGV: marker ('' = only look), marker ttl ms, owner ('' = no lock), lock
 * ttl ms, user ('' = no token), "<user>|<key>", token ttl s.
 * Returns {1, record}, {2} (locked by another request), {0} (no token) or
 * {0, spend's verdict}: marker and lock are then held whatever the token
 * said, and the caller gives them back on a refusal. */
static const char begin_lua[] =
    SPEND_LUA "local rec\n"
              "if ARGV[1] ~= '' then\n"
              "  rec = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')\n"
              "else\n"
              "  rec = redis.call('GET', KEYS[1])\n"
              "end\n"
              "if rec then return {1, rec} end\n"
              "if ARGV[3] ~= '' then\n"
              "  if not redis.call('SET', KEYS[2], ARGV[3], 'NX', 'PX', ARGV[4]) then\n"
              "    if ARGV[1] ~= '' then redis.call('DEL', KEYS[1]) end\n"
              "    return {2}\n"
              "  end\n"
              "end\n"
              "if ARGV[5] ~= '' then return {0, spend(KEYS[3], ARGV[5], ARGV[6], ARGV[7])} end\n"
              "return {0}\n";

/* The key has ended (completed or released): when copies wait for it
 * (Prefer: wait; watch_lua set their flag), the flag goes and its channel,
 * named like the flag, announces it to every instance's listener
 * (keyevents_redis.c). Without waiters, nothing is published. */
#define ANNOUNCE_LUA                                                                               \
    "if redis.call('DEL', KEYS[3]) == 1 then redis.call('PUBLISH', KEYS[3], '1') end\n"

/* Success: our marker becomes the completed record; our lock is released.
 * A marker that expired and was taken by another request is not ours to
 * overwrite. KEYS: idem, lock, waiters' flag. ARGV: marker, record, ttl_s,
 * owner. */
static const char complete_lua[] =
    "local cur = redis.call('GET', KEYS[1])\n"
    "if (ARGV[1] ~= '' and cur == ARGV[1]) or (ARGV[1] == '' and not cur) then\n"
    "  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])\n"
    "end\n"
    "if ARGV[4] ~= '' and redis.call('GET', KEYS[2]) == ARGV[4] then\n"
    "  redis.call('DEL', KEYS[2])\n"
    "end\n" ANNOUNCE_LUA "return 1\n";

/* Failure: compare-and-delete of marker and lock. KEYS: idem, lock,
 * waiters' flag. ARGV: marker, owner ('' for one not taken). */
static const char release_lua[] =
    "if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "end\n"
    "if ARGV[2] ~= '' and redis.call('GET', KEYS[2]) == ARGV[2] then\n"
    "  redis.call('DEL', KEYS[2])\n"
    "end\n" ANNOUNCE_LUA "return 1\n";

/* A waiting copy's look (keyevents_watch). KEYS: idem, waiters' flag.
 * ARGV: the record the copy saw, ttl ms. Returns 1 when the key still
 * holds it, the flag then set for at least ttl ms, so that the key's end
 * is announced (ANNOUNCE_LUA); 0 when it holds something else. Look and
 * flag in one step: an end is either announced or seen here. */
static const char watch_lua[] = "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
                                "if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then\n"
                                "  redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])\n"
                                "end\n"
                                "return 1\n";

/* A dead request's marker becomes ours, with its lock (free, or still the
 * dead request's). KEYS: idem, lock. ARGV: stale marker, our marker,
 * marker ttl ms, stale owner, our owner ('' = no lock), lock ttl ms.
 * Returns 1 (ours), 0 (the record changed) or 2 (the lock is another's). */
static const char take_over_lua[] = "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
                                    "if ARGV[5] ~= '' then\n"
                                    "  local l = redis.call('GET', KEYS[2])\n"
                                    "  if l and l ~= ARGV[4] then return 2 end\n"
                                    "  redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[6])\n"
                                    "end\n"
                                    "redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])\n"
                                    "return 1\n";

/* The Bloom filter (cache.h). KEYS: bits, state. ARGV[1]: "m:k:", then
 * the positions. Returns {trusted, maybe}. */
static const char bloom_check_lua[] =
    "local st = redis.call('GET', KEYS[2])\n"
    "local t = 0\n"
    "if st and string.sub(st, 1, #ARGV[1]) == ARGV[1] and string.sub(st, -2) == ':1' then t = 1 "
    "end\n"
    "for i = 2, #ARGV do\n"
    "  if redis.call('GETBIT', KEYS[1], ARGV[i]) == 0 then return {t, 0} end\n"
    "end\n"
    "return {t, 1}\n";

static const char bloom_add_lua[] = "for i = 1, #ARGV do redis.call('SETBIT', KEYS[1], ARGV[i], 1) "
                                    "end\n"
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

struct redis_script cache_lua_bloom_check = {bloom_check_lua, ""};
struct redis_script cache_lua_bloom_add = {bloom_add_lua, ""};
struct redis_script cache_lua_bloom_begin = {bloom_begin_lua, ""};
struct redis_script cache_lua_bloom_progress = {bloom_progress_lua, ""};
struct redis_script cache_lua_begin = {begin_lua, ""};
struct redis_script cache_lua_take_over = {take_over_lua, ""};
struct redis_script cache_lua_token_take = {token_take_lua, ""};
struct redis_script cache_lua_complete = {complete_lua, ""};
struct redis_script cache_lua_release = {release_lua, ""};
struct redis_script cache_lua_watch = {watch_lua, ""};

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
