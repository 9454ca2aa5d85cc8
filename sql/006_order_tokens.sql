-- ticketd schema, version 6: the database remembers which order token each
-- order spent.
--
-- Whether a token is spent used to live only in Redis, which forgets
-- (FLUSHALL, a restart without persistence, a Sentinel failover that lost
-- the last writes). A genuine token Redis forgot is let through to the
-- database, and without this table it bought one more order for every new
-- Idempotency-Key until it expired. The row is written by the order's own
-- transaction (place_in_one_trip in store_mysql.c), so a token whose order was
-- rolled back (SOLD_OUT) is not recorded and may be presented again. The
-- unique key refuses a second order for one token: 409 ORDER_TOKEN_INVALID.
--
-- A new table, not a column on orders: existing rows stay as they are (the
-- tokens spent before this migration are still in Redis, for their TTL),
-- and a cart that spends one token for several orders records it once.
CREATE TABLE order_tokens (
    order_id   BIGINT UNSIGNED NOT NULL,
    -- SHA-256 of the token, lowercase hex: the token is a bearer secret and
    -- its hash is all a uniqueness check needs.
    token_hash CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_at DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (order_id),
    UNIQUE KEY uq_order_tokens_token (token_hash),
    CONSTRAINT fk_order_tokens_order FOREIGN KEY (order_id) REFERENCES orders (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
