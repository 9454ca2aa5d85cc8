-- ticketd schema, version 13: a batch of new orders placed by the database,
-- in one round trip, each order decided on its own (service/mysql/merge_batch.h).
--
-- The caller sends, in one text:
--   START TRANSACTION; CALL place_orders('[{...}, ...]'); SELECT @placed_orders; COMMIT
-- and reads one outcome per order from @placed_orders. The orders are a JSON
-- array, in arrival order, each {"n": order_no, "u": user, "s": session,
-- "r": request, "q": quantity, "c": created_at, "t": token hash (optional),
-- "m": 1 when the order-key filter missed it (optional)}.
--
-- Each order is decided by the statements the lessons teach, in two passes:
--   1. in arrival order, its INSERT under the unique key (user_id,
--      request_id): a key that has its order (committed, or earlier in this
--      batch) is refused there, 1062, and answered as a duplicate; then its
--      token's unique row (a token another order spent: 1062, and this
--      order's insert is rolled back to its savepoint); then the filter's
--      miss row. No session row is locked in this pass: a duplicate that
--      waits for another transaction's uncommitted copy holds nothing that
--      other buyers need.
--   2. the stock decrements, per session in ascending id (two batches never
--      wait for each other in a cycle), and in arrival order within one
--      (first come, first served): UPDATE ... SET stock = stock - q, the
--      compare-and-set, refused by CHECK (stock >= 0) (4025) when the seats
--      are gone. A refused order's rows are deleted again, in the same
--      transaction: nothing of it is ever committed.
-- The hot session's row is locked only in the second pass, just before
-- COMMIT, and for no client round trip.
--
-- Inserts are single-row INSERT ... VALUES: an INSERT ... SELECT into orders
-- takes the table's auto-increment lock for the whole statement (the default
-- innodb_autoinc_lock_mode = 1), and a statement waiting for a duplicate key
-- while holding it closed a three-way deadlock that MariaDB reported as 1467.
--
-- Every write first checks that the transaction is still open: a Galera node
-- can roll a transaction back under a running statement (a replicated write
-- needed its rows), and what followed would otherwise run on its own, in
-- autocommit. The check refuses with 1213, which the service retries whole.
--
-- Outcomes: "<i> P <id> <amount>," for an order placed, "<i> X," otherwise,
-- with X one of D (the key has an order), R (the random order number
-- collided), N (no such session), S (sold out), T (the token was spent);
-- i counts the orders from 1.
DELIMITER //
CREATE PROCEDURE place_orders(IN batch LONGTEXT)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
BEGIN
    DECLARE done, failed INT DEFAULT 0;
    DECLARE i, qty INT;
    DECLARE missed TINYINT;
    DECLARE usr, sess, price, oid, amount BIGINT UNSIGNED;
    DECLARE no CHAR(20) CHARACTER SET ascii;
    DECLARE req VARCHAR(64) CHARACTER SET utf8mb4;
    DECLARE tok CHAR(64) CHARACTER SET ascii;
    DECLARE at DATETIME(3);
    DECLARE msg TEXT;
    DECLARE outcomes, placed LONGTEXT DEFAULT '';
    DECLARE orders CURSOR FOR
        SELECT j.i, j.n, j.u, j.s, j.r, j.q, j.t, j.m, j.c FROM JSON_TABLE(batch, '$[*]' COLUMNS (
            i FOR ORDINALITY,
            n CHAR(20) CHARACTER SET ascii PATH '$.n',
            u BIGINT UNSIGNED PATH '$.u',
            s BIGINT UNSIGNED PATH '$.s',
            r VARCHAR(64) CHARACTER SET utf8mb4 PATH '$.r',
            q INT PATH '$.q',
            t CHAR(64) CHARACTER SET ascii PATH '$.t',
            m TINYINT PATH '$.m' DEFAULT '0' ON EMPTY,
            c DATETIME(3) PATH '$.c')) AS j;
    DECLARE takes CURSOR FOR
        SELECT j.i, j.id, j.s, j.q, j.a, j.m FROM JSON_TABLE(CONCAT('[', placed, ']'), '$[*]' COLUMNS (
            i INT PATH '$.i',
            id BIGINT UNSIGNED PATH '$.id',
            s BIGINT UNSIGNED PATH '$.s',
            q INT PATH '$.q',
            a BIGINT UNSIGNED PATH '$.a',
            m TINYINT PATH '$.m')) AS j
        ORDER BY j.s, j.i;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = 1;
    DECLARE CONTINUE HANDLER FOR 1062
    BEGIN
        GET DIAGNOSTICS CONDITION 1 msg = MESSAGE_TEXT;
        SET failed = 1062;
    END;
    DECLARE CONTINUE HANDLER FOR 4025 SET failed = 4025;

    OPEN orders;
    insert_each: LOOP
        FETCH orders INTO i, no, usr, sess, req, qty, tok, missed, at;
        IF done THEN
            LEAVE insert_each;
        END IF;
        -- A plain read, which locks nothing (a SET of a subquery would take a
        -- shared lock on the session row and hold it while the INSERT waits).
        SELECT MAX(price_cents) INTO price FROM sessions WHERE id = sess;
        IF price IS NULL THEN
            SET outcomes = CONCAT(outcomes, i, ' N,');
            ITERATE insert_each;
        END IF;
        IF NOT @@in_transaction THEN
            SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213,
                MESSAGE_TEXT = 'place_orders: the transaction was rolled back under it';
        END IF;
        IF tok IS NOT NULL THEN
            SAVEPOINT one_order;
        END IF;
        SET failed = 0, amount = price * qty;
        INSERT INTO orders (order_no, user_id, session_id, request_id, quantity, amount_cents,
                            status, version, created_at, updated_at)
        VALUES (no, usr, sess, req, qty, amount, 'PENDING_PAYMENT', 1, at, at);
        IF failed = 1062 THEN
            SET outcomes = CONCAT(outcomes, i, IF(msg LIKE '%uq_orders_order_no%', ' R,', ' D,'));
            ITERATE insert_each;
        END IF;
        SET oid = LAST_INSERT_ID();
        IF tok IS NOT NULL THEN
            IF NOT @@in_transaction THEN
                SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213,
                    MESSAGE_TEXT = 'place_orders: the transaction was rolled back under it';
            END IF;
            INSERT INTO order_tokens (order_id, token_hash, created_at) VALUES (oid, tok, at);
            IF failed = 1062 THEN
                ROLLBACK TO SAVEPOINT one_order;
                SET outcomes = CONCAT(outcomes, i, ' T,');
                ITERATE insert_each;
            END IF;
        END IF;
        IF missed THEN
            IF NOT @@in_transaction THEN
                SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213,
                    MESSAGE_TEXT = 'place_orders: the transaction was rolled back under it';
            END IF;
            INSERT INTO order_key_filter_misses (order_id, created_at) VALUES (oid, at);
        END IF;
        SET placed = CONCAT(placed, IF(placed = '', '', ','),
                            JSON_OBJECT('i', i, 'id', oid, 's', sess, 'q', qty, 'a', amount,
                                        'm', missed));
    END LOOP;
    CLOSE orders;

    SET done = 0;
    OPEN takes;
    take_each: LOOP
        FETCH takes INTO i, oid, sess, qty, amount, missed;
        IF done THEN
            LEAVE take_each;
        END IF;
        IF NOT @@in_transaction THEN
            SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213,
                MESSAGE_TEXT = 'place_orders: the transaction was rolled back under it';
        END IF;
        SET failed = 0;
        UPDATE sessions SET stock = stock - qty, version = version + 1 WHERE id = sess;
        IF failed = 0 THEN
            SET outcomes = CONCAT(outcomes, i, ' P ', oid, ' ', amount, ',');
            ITERATE take_each;
        END IF;
        -- Sold out: this order's rows go again, its neighbours' stay.
        IF NOT @@in_transaction THEN
            SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213,
                MESSAGE_TEXT = 'place_orders: the transaction was rolled back under it';
        END IF;
        DELETE FROM order_tokens WHERE order_id = oid;
        IF missed THEN
            DELETE FROM order_key_filter_misses WHERE order_id = oid;
        END IF;
        DELETE FROM order_history WHERE order_id = oid;
        DELETE FROM orders WHERE id = oid;
        SET outcomes = CONCAT(outcomes, i, ' S,');
    END LOOP;
    CLOSE takes;
    SET @placed_orders = outcomes;
END //
DELIMITER ;
