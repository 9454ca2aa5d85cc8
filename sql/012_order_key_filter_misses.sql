-- ticketd schema, version 12: the orders the order-key filter was not told
-- of, so that every instance stops trusting it.
--
-- The filter (bloom.h) says "this key certainly has no order" only while
-- it has seen every order. An instance that cannot reach Redis still
-- completes orders (TICKETD_REDIS_POLICY=degrade) without adding their
-- keys, and the other instances, which reach Redis, would believe the
-- filter about them. Such an order writes a row here in its own
-- transaction, so the row exists exactly when the order does, whatever
-- becomes of the instance after its COMMIT. Every instance's filter job
-- reads this table each round (TICKETD_BLOOM_CHECK_MS): a row found, it
-- declares the filter untrusted in Redis (the next build reads the orders
-- table, these orders included), then deletes the rows it saw.
CREATE TABLE order_key_filter_misses (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    order_id   BIGINT UNSIGNED NOT NULL,
    created_at DATETIME(3)     NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
