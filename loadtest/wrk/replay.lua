-- wrk script: the same POST /api/v1/orders over and over, with the key,
-- token and body of an order that already completed, so that every request
-- is answered by ticketd's replay path (response cache) and nothing else.
--
-- Settings come from the environment (bench.sh sets them):
--   BENCH_JWT      the user's JWT
--   BENCH_KEY      the Idempotency-Key of the completed order
--   BENCH_TOKEN    its X-Order-Token (may be empty)
--   BENCH_BODY     the exact JSON body of the completed order request

local jwt = os.getenv("BENCH_JWT") or ""
local key = os.getenv("BENCH_KEY") or ""
local token = os.getenv("BENCH_TOKEN") or ""
local body = os.getenv("BENCH_BODY") or ""

wrk.method = "POST"
wrk.path = "/api/v1/orders"
wrk.body = body
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. jwt
wrk.headers["Idempotency-Key"] = key
if token ~= "" then
    wrk.headers["X-Order-Token"] = token
end

-- No response() hook: wrk then skips parsing each answer, and its own
-- "Non-2xx or 3xx responses" line already counts any answer but a replay.
