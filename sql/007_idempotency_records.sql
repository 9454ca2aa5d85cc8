-- ticketd schema, version 7: a durable record of an answer under an
-- Idempotency-Key, for requests whose answer is not one business row.
--
-- A cart (POST /api/v1/orders/batch) is several orders under their own item
-- keys, answered together under the batch key. Each order is its own row in
-- `orders`; the batch's answer (which items bought what, which failed) is
-- kept here, so a retry of the batch after Redis lost its records is
-- answered from the database, and another item list under the same batch
-- key is refused (422) by its fingerprint.
--
-- Columns:
--   scope        what kind of request the key belongs to ('batch'); one user
--                may use the same key text in two scopes without a clash
--   user_id      the key's owner: keys are per user
--   idem_key     the Idempotency-Key, exactly as the client sent it
--   created_day  the UTC day the record was first written. It is part of the
--                primary key because MariaDB requires a partitioning column
--                in every unique key: the table can be partitioned by day
--                and a day past its retention dropped as a whole. The
--                service writes a key's later answers into the row of the
--                day it was first written, so (scope, user_id, idem_key)
--                has one row unless a retry comes after that day's
--                partition was dropped.
--   fingerprint  hex SHA-256 of the request's canonical payload
--   complete     1 when the answer is final (every item has its order): it
--                is replayed as it stands; 0 while items are still to be
--                bought, and a retry runs those again
--   status       the HTTP status of the answer kept
--   response     the answer's body, byte for byte
--   created_at   when the record was first written
--   updated_at   when its answer was last replaced
CREATE TABLE IF NOT EXISTS idempotency_records (
    scope        VARCHAR(16)  NOT NULL,
    user_id      BIGINT       NOT NULL,
    idem_key     VARCHAR(64)  NOT NULL,
    created_day  DATE         NOT NULL,
    fingerprint  CHAR(64)     NOT NULL,
    complete     TINYINT(1)   NOT NULL,
    status       SMALLINT     NOT NULL,
    response     MEDIUMTEXT   NOT NULL,
    created_at   DATETIME(3)  NOT NULL,
    updated_at   DATETIME(3)  NOT NULL,
    PRIMARY KEY (scope, user_id, idem_key, created_day),
    KEY ix_idempotency_records_day (created_day)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
