-- ticketd schema, version 8: the tables that exist only to deduplicate or to
-- relay are partitioned by day, so that what is past its window goes with
-- ALTER TABLE ... DROP PARTITION (a file removed) instead of a DELETE over
-- a range (every row locked, logged and replicated one by one).
--
-- Each gets created_day, the UTC day its row was written, filled in by the
-- database (DEFAULT), and from created_at for the rows already there. The
-- partitioning column must be part of every unique key (MariaDB's rule), so
-- each unique key now holds the day too: two rows with the same key written
-- on two different days are both accepted. Within a day nothing changes;
-- across midnight, and beyond the window once a partition is dropped, the
-- business tables are the last word: orders (uq_orders_user_request),
-- payments (uq_payments_txn, uq_payments_applied), the points ledger (009),
-- and the order state machine. Those tables are never partitioned.
--
-- Every table starts with one partition for everything, p_future; the
-- retention job (`ticketd partitions`, and every serve and worker) splits
-- day partitions off it ahead of time and drops those past retention.

ALTER TABLE consume_records
    ADD COLUMN created_day DATE NOT NULL DEFAULT (UTC_DATE()) AFTER created_at;
UPDATE consume_records SET created_day = DATE(created_at);
ALTER TABLE consume_records
    DROP PRIMARY KEY,
    ADD PRIMARY KEY (consumer, biz_key, created_day)
    PARTITION BY RANGE (TO_DAYS(created_day)) (PARTITION p_future VALUES LESS THAN MAXVALUE);

-- The relay looks rows up by id and by (published_at, id); the event's
-- business key stays unique within a day. A partition is dropped only when
-- none of its rows is still waiting to be relayed.
ALTER TABLE outbox
    ADD COLUMN created_day DATE NOT NULL DEFAULT (UTC_DATE()) AFTER created_at;
UPDATE outbox SET created_day = DATE(created_at);
ALTER TABLE outbox
    DROP PRIMARY KEY,
    ADD PRIMARY KEY (id, created_day),
    DROP KEY uq_outbox_event,
    ADD UNIQUE KEY uq_outbox_event (event_type, biz_key, created_day)
    PARTITION BY RANGE (TO_DAYS(created_day)) (PARTITION p_future VALUES LESS THAN MAXVALUE);

-- A partition of dead letters is dropped only when every letter in it has
-- been re-driven: an open letter is an operator's to-do.
ALTER TABLE dead_letters
    ADD COLUMN created_day DATE NOT NULL DEFAULT (UTC_DATE()) AFTER replay_result;
UPDATE dead_letters SET created_day = DATE(created_at);
ALTER TABLE dead_letters
    DROP PRIMARY KEY,
    ADD PRIMARY KEY (id, created_day)
    PARTITION BY RANGE (TO_DAYS(created_day)) (PARTITION p_future VALUES LESS THAN MAXVALUE);
