-- An Idempotency-Key names one intent of one user, whatever session the
-- payload names. (user_id, session_id, request_id) alone lets a reused key
-- with another session_id create a second order whenever Redis has no record
-- of the first (degraded, flushed, expired); this key makes the database
-- refuse it too, so the service can answer 422 IDEMPOTENCY_KEY_REUSED.
ALTER TABLE orders ADD UNIQUE KEY uq_orders_user_request (user_id, request_id);
