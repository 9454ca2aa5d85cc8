-- ticketd schema, version 14: place_orders (sql/013_place_orders.sql) keeps
-- a row lock waited for in vain to the orders that needed it.
--
-- Every connection waits for a row lock less than its read timeout
-- (service/mysql/db.h, db_lock_wait_s). When another transaction holds a
-- session's row (an administrator's, a slow client's, a Galera apply) for
-- longer, the UPDATE of its stock fails with 1205 and only that statement is
-- rolled back (innodb_rollback_on_timeout is OFF). Version 13 let the error
-- end the CALL, and the whole batch was rolled back: every order of it was
-- refused for one session's row. Now the 1205 is caught like a sold-out seat:
-- that session's orders in the batch are answered "L" (their rows deleted
-- again, in the same transaction; the session is not waited for a second
-- time), and the batch goes on and commits the others. An INSERT that waits
-- in vain (another transaction's uncommitted copy of the key, or of the
-- token) is answered "K" for that order alone.
--
-- Outcomes as in version 13, and two more, both with nothing of the order
-- kept: L, its session's row was held by another transaction past the lock
-- wait (the service notes the row held and places the order alone,
-- service/mysql/store_merge.h); K, its key's or token's row was (the
-- service places it alone, where it meets the other transaction's outcome).
--
-- Everything else is version 13's, word for word; its comments there.
DROP PROCEDURE IF EXISTS place_orders;
DELIMITER //
CREATE PROCEDURE place_orders(IN batch LONGTEXT)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
BEGIN
    DECLARE done, failed INT DEFAULT 0;
    DECLARE i, qty INT;
    DECLARE missed TINYINT;
    DECLARE usr, sess, price, oid, amount BIGINT UNSIGNED;
    DECLARE held BIGINT UNSIGNED DEFAULT NULL; -- the session whose row lock timed out
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
    -- A row lock waited for in vain: the statement was rolled back, the
    -- transaction goes on.
    DECLARE CONTINUE HANDLER FOR 1205 SET failed = 1205;

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
        -- orders come together, by the cursor's order, and its row is waited
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
    END LOOP;
    CLOSE takes;
    SET @placed_orders = outcomes;
END //
DELIMITER ;
