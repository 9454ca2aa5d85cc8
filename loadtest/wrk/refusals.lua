-- wrk script: a refusal storm. POST /api/v1/orders under a new
-- Idempotency-Key each time, for a user whose session another request
-- holds (bench.sh sets its lock in Redis): every answer is Redis's 409
-- DUPLICATE_SUBMISSION, and before each ticketd asks whether the key has
-- an order, of the order-key filter and, when it cannot say "certainly
-- not", of the database.
--
-- Settings come from the environment (bench.sh sets them):
--   BENCH_JWT      the user's JWT
--   BENCH_BODY     the order request's JSON body

local jwt = os.getenv("BENCH_JWT") or ""
local body = os.getenv("BENCH_BODY") or ""
local counter = 0
local thread_id = 0
local next_id = 0

function setup(thread)
    next_id = next_id + 1
    thread:set("thread_id", next_id)
end

function init(args)
    thread_id = wrk.thread:get("thread_id") or 0
end

function request()
    counter = counter + 1
    local headers = {
        ["Content-Type"] = "application/json",
        ["Authorization"] = "Bearer " .. jwt,
        ["Idempotency-Key"] = string.format("refusal-%d-%d", thread_id, counter),
    }
    return wrk.format("POST", "/api/v1/orders", headers, body)
end
