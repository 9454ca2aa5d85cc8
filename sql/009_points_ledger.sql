-- ticketd schema, version 9: the points consumer's own business key.
--
-- consume_records dedupes a redelivered order.paid event only while its row
-- is kept (008 drops it with its partition) and only within one day (its
-- key holds the day). The ledger is a business table, never dropped: one
-- row per order credited, so a late redelivery, whatever its age, meets
-- uq_points_ledger_order in the transaction that would credit the points
-- twice.
CREATE TABLE points_ledger (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    order_no   CHAR(20)        NOT NULL,
    user_id    BIGINT UNSIGNED NOT NULL,
    points     BIGINT UNSIGNED NOT NULL,
    created_at DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uq_points_ledger_order (order_no),
    KEY ix_points_ledger_user (user_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The orders credited before the ledger existed, from the points
-- consumer's dedup rows, so that a redelivery of an old event is refused
-- too. The points are those the consumer credited: one per whole 100 cents
-- (consume.h, CENTS_PER_POINT).
INSERT INTO points_ledger (order_no, user_id, points, created_at)
SELECT o.order_no, o.user_id, FLOOR(o.amount_cents / 100), c.created_at
FROM consume_records c
JOIN orders o ON c.biz_key = CONCAT('points:', o.order_no)
WHERE c.consumer = 'points';
