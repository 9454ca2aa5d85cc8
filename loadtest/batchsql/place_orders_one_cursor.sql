-- A variant of place_orders (sql/016_place_orders_price_in_cursor.sql) that
-- walks its batch with one cursor instead of two, measured with batchsql
-- (mode batch) and not kept: docs/speed.md, "Tried and dropped: one cursor
-- for both passes". Not a migration: to measure it, load it by hand into a
-- server nothing else uses (it replaces place_orders), run batchsql, and
-- load sql/016_place_orders_price_in_cursor.sql again afterwards.
--
-- Version 16 opens a second cursor for its second pass, over a JSON text of
-- the orders its first pass placed (JSON_OBJECT per order, then JSON_TABLE,
-- materialised and sorted by session). Here the first pass already goes in
-- the second pass's order (by session, within one session by arrival) and
-- notes each placed order in fixed-width fields of a text that the second
-- pass reads back by position. What the passes decide is version 16's, but
-- for one thing: two orders of one batch that collide on a key or a token
-- while in different sessions are decided in session order, not arrival
-- order.
DROP PROCEDURE IF EXISTS place_orders;
DELIMITER //
CREATE PROCEDURE place_orders(IN batch LONGTEXT)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
BEGIN
    DECLARE done, failed INT DEFAULT 0;
    DECLARE i, qty, at_field INT;
    DECLARE missed TINYINT;
    DECLARE usr, sess, price, oid, amount BIGINT UNSIGNED;
    DECLARE held BIGINT UNSIGNED DEFAULT NULL; -- the session whose row lock timed out
    DECLARE no CHAR(20) CHARACTER SET ascii;
    DECLARE req VARCHAR(64) CHARACTER SET utf8mb4;
    DECLARE tok CHAR(64) CHARACTER SET ascii;
    DECLARE at DATETIME(3);
    DECLARE msg TEXT;
    DECLARE outcomes LONGTEXT DEFAULT '';
    -- The placed orders, 6 fields of 20 digits each (i, id, session,
    -- quantity, amount, missed): read back by position in pass 2.
    DECLARE placed LONGTEXT CHARACTER SET ascii DEFAULT '';
    DECLARE orders CURSOR FOR
        SELECT j.i, j.n, j.u, j.s, j.r, j.q, j.t, j.m, j.c, p.price_cents
        FROM JSON_TABLE(batch, '$[*]' COLUMNS (
            i FOR ORDINALITY,
            n CHAR(20) CHARACTER SET ascii PATH '$.n',
            u BIGINT UNSIGNED PATH '$.u',
            s BIGINT UNSIGNED PATH '$.s',
            r VARCHAR(64) CHARACTER SET utf8mb4 PATH '$.r',
            q INT PATH '$.q',
            t CHAR(64) CHARACTER SET ascii PATH '$.t',
            m TINYINT PATH '$.m' DEFAULT '0' ON EMPTY,
            c DATETIME(3) PATH '$.c')) AS j
        LEFT JOIN sessions p ON p.id = j.s
        ORDER BY j.s, j.i;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = 1;
    DECLARE CONTINUE HANDLER FOR 1062
    BEGIN
        GET DIAGNOSTICS CONDITION 1 msg = MESSAGE_TEXT;
        SET failed = 1062;
    END;
    DECLARE CONTINUE HANDLER FOR 4025 SET failed = 4025;
    -- A row lock waited for in vain: the statement was rolled back, the
    -- transaction goes on.
    DECLARE CONTINUE HANDLER FOR 1205 SET failed = 1205;

    OPEN orders;
    insert_each: LOOP
        FETCH orders INTO i, no, usr, sess, req, qty, tok, missed, at, price;
        IF done THEN
            LEAVE insert_each;
        END IF;
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
        IF failed = 1205 THEN
            SET outcomes = CONCAT(outcomes, i, ' K,');
            ITERATE insert_each;
        END IF;
        SET oid = LAST_INSERT_ID();
        IF tok IS NOT NULL THEN
            IF NOT @@in_transaction THEN
                SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213,
                    MESSAGE_TEXT = 'place_orders: the transaction was rolled back under it';
            END IF;
            INSERT INTO order_tokens (order_id, token_hash, created_at) VALUES (oid, tok, at);
            IF failed = 1062 OR failed = 1205 THEN
                ROLLBACK TO SAVEPOINT one_order;
                SET outcomes = CONCAT(outcomes, i, IF(failed = 1062, ' T,', ' K,'));
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
        SET placed = CONCAT(placed, LPAD(i, 20, '0'), LPAD(oid, 20, '0'), LPAD(sess, 20, '0'),
                            LPAD(qty, 20, '0'), LPAD(amount, 20, '0'), LPAD(missed, 20, '0'));
    END LOOP;
    CLOSE orders;

    SET at_field = 1;
    take_each: WHILE at_field < LENGTH(placed) DO
        SET i = CAST(SUBSTRING(placed, at_field, 20) AS UNSIGNED),
            oid = CAST(SUBSTRING(placed, at_field + 20, 20) AS UNSIGNED),
            sess = CAST(SUBSTRING(placed, at_field + 40, 20) AS UNSIGNED),
            qty = CAST(SUBSTRING(placed, at_field + 60, 20) AS UNSIGNED),
            amount = CAST(SUBSTRING(placed, at_field + 80, 20) AS UNSIGNED),
            missed = CAST(SUBSTRING(placed, at_field + 100, 20) AS UNSIGNED),
            at_field = at_field + 120;
        IF NOT @@in_transaction THEN
            SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213,
                MESSAGE_TEXT = 'place_orders: the transaction was rolled back under it';
        END IF;
        SET failed = 0;
        IF held IS NULL OR sess <> held THEN
            UPDATE sessions SET stock = stock - qty, version = version + 1 WHERE id = sess;
            IF failed = 0 THEN
                SET outcomes = CONCAT(outcomes, i, ' P ', oid, ' ', amount, ',');
                ITERATE take_each;
            END IF;
            IF failed = 1205 THEN
                SET held = sess;
            END IF;
        END IF;
        -- Sold out, or the session's row held by another transaction (its
        -- orders come together, in the cursor's order, and its row is waited
        -- for once): this order's rows go again, its neighbours' stay.
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
        SET outcomes = CONCAT(outcomes, i, IF(sess = held, ' L,', ' S,'));
    END WHILE;
    SET @placed_orders = outcomes;
END //
DELIMITER ;
