-- ticketd schema, version 1.
--
-- The constraints below are the last line of every defence: whatever Redis
-- says, the database refuses a second order for one request, negative stock,
-- a second row for one gateway transaction and a second effect of one event.

CREATE TABLE sessions (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    title       VARCHAR(200)    NOT NULL,
    price_cents BIGINT UNSIGNED NOT NULL,
    capacity    INT UNSIGNED    NOT NULL,
    -- Stock only ever moves by a decrement the database computes from the row
    -- it writes (stock = stock - ? WHERE id = ?, ORDER_STOCK in store_mysql.c),
    -- and this CHECK refuses the one that would go below zero (sold out): an
    -- oversell is impossible even for a buggy writer.
    stock       INT             NOT NULL,
    version     BIGINT UNSIGNED NOT NULL DEFAULT 0,
    created_at  DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    CONSTRAINT ck_sessions_stock CHECK (stock >= 0 AND stock <= capacity)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE orders (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    order_no     CHAR(20)        NOT NULL,
    user_id      BIGINT UNSIGNED NOT NULL,
    session_id   BIGINT UNSIGNED NOT NULL,
    -- The client's Idempotency-Key: one order per user, session and key.
    request_id   VARCHAR(64)     NOT NULL,
    quantity     INT UNSIGNED    NOT NULL,
    amount_cents BIGINT UNSIGNED NOT NULL,
    status       ENUM ('PENDING_PAYMENT', 'PAID', 'TICKETED', 'COMPLETED', 'CANCELLED') NOT NULL,
    version      BIGINT UNSIGNED NOT NULL DEFAULT 1,
    created_at   DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    updated_at   DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uq_orders_order_no (order_no),
    UNIQUE KEY uq_orders_request (user_id, session_id, request_id),
    -- Listing a user's orders newest first, and the expiry sweep.
    KEY ix_orders_user (user_id, id),
    KEY ix_orders_status_created (status, created_at),
    -- No foreign key to sessions, on purpose: its check takes a shared lock
    -- on the session row, and the stock CAS that follows needs an exclusive
    -- one, so concurrent orders for one hot session deadlock each other.
    -- The order transaction reads the session first, in the same
    -- transaction, and sessions are never deleted.
    KEY ix_orders_session (session_id),
    CONSTRAINT ck_orders_quantity CHECK (quantity >= 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Every state change of an order, written in the transaction that made it.
CREATE TABLE order_history (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    order_id    BIGINT UNSIGNED NOT NULL,
    from_status VARCHAR(20)     NULL,
    to_status   VARCHAR(20)     NOT NULL,
    version     BIGINT UNSIGNED NOT NULL,
    cause       VARCHAR(64)     NOT NULL,
    created_at  DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    -- One history row per version of an order: a transition cannot be recorded twice.
    UNIQUE KEY uq_history_version (order_id, version),
    CONSTRAINT fk_history_order FOREIGN KEY (order_id) REFERENCES orders (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per gateway transaction id, inserted in the same transaction as the
-- order transition it causes; the outcome is replayed to the gateway's retries.
CREATE TABLE payments (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    txn_id       VARCHAR(64)     NOT NULL,
    order_id     BIGINT UNSIGNED NOT NULL,
    amount_cents BIGINT UNSIGNED NOT NULL,
    status       ENUM ('SUCCESS', 'FAILED') NOT NULL,
    outcome      ENUM ('APPLIED', 'PAYMENT_FAILED', 'DUPLICATE_PAYMENT', 'LATE_PAYMENT',
                       'AMOUNT_MISMATCH') NOT NULL,
    order_status VARCHAR(20)     NOT NULL,
    -- Non-NULL only for the payment that moved the order to PAID, so the unique
    -- key below allows at most one applied payment per order.
    applied_order_id BIGINT UNSIGNED NULL,
    created_at   DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uq_payments_txn (txn_id),
    UNIQUE KEY uq_payments_applied (applied_order_id),
    KEY ix_payments_order (order_id),
    CONSTRAINT fk_payments_order FOREIGN KEY (order_id) REFERENCES orders (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Transactional outbox: events written in the transaction of the change they
-- describe, relayed to a Redis stream afterwards (at least once).
CREATE TABLE outbox (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    event_type   VARCHAR(64)     NOT NULL,
    biz_key      VARCHAR(128)    NOT NULL,
    payload      TEXT            NOT NULL,
    created_at   DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    published_at DATETIME(3)     NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_outbox_event (event_type, biz_key),
    KEY ix_outbox_unpublished (published_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A consumer's record of the business keys whose effect it has applied,
-- inserted in the same transaction as the effect.
CREATE TABLE consume_records (
    consumer   VARCHAR(32)     NOT NULL,
    biz_key    VARCHAR(128)    NOT NULL,
    created_at DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (consumer, biz_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE user_points (
    user_id    BIGINT UNSIGNED NOT NULL,
    points     BIGINT UNSIGNED NOT NULL DEFAULT 0,
    updated_at DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (user_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
