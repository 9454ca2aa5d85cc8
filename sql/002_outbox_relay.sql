-- ticketd schema, version 2: what the outbox relay needs to notice stream
-- entries that Redis lost, and to remember the events consumers gave up on.

-- The id of the stream entry the relay last published the row as. Redis may
-- lose entries (a restart without persistence, FLUSHALL, trimming): a row
-- whose entry is older than the oldest entry still in the stream, and whose
-- consumers have not all recorded it, is queued again (published_at = NULL).
ALTER TABLE outbox ADD COLUMN stream_id VARCHAR(41) NULL AFTER published_at;

-- Events a consumer group moved to the dead-letter stream after too many
-- failed deliveries, or because they could never be applied. A dead-lettered
-- row counts as settled for that group, so the relay never queues it again;
-- an operator replays it by deleting this row and resetting published_at.
CREATE TABLE dead_letters (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    consumer   VARCHAR(32)     NOT NULL,
    -- The consumer's business key, as in consume_records ("points:<order_no>").
    biz_key    VARCHAR(128)    NOT NULL,
    outbox_id  BIGINT UNSIGNED NOT NULL,
    stream_id  VARCHAR(41)     NOT NULL,
    deliveries INT UNSIGNED    NOT NULL,
    reason     VARCHAR(200)    NOT NULL,
    created_at DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    KEY ix_dead_letters_key (consumer, biz_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
