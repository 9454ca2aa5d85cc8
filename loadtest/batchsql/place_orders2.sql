DROP PROCEDURE IF EXISTS place_orders2;
DELIMITER //
CREATE PROCEDURE place_orders2(IN batch LONGTEXT, IN takes LONGTEXT)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
BEGIN
    DECLARE failed INT DEFAULT 0;
    DECLARE n, i, j, qty INT;
    DECLARE missed TINYINT;
    DECLARE usr, sess, price, oid, amount BIGINT UNSIGNED;
    DECLARE no CHAR(20) CHARACTER SET ascii;
    DECLARE req VARCHAR(64) CHARACTER SET utf8mb4;
    DECLARE tok CHAR(64) CHARACTER SET ascii;
    DECLARE at DATETIME(3);
    DECLARE msg TEXT;
    DECLARE o, outcomes LONGTEXT DEFAULT '';
    DECLARE placed LONGTEXT DEFAULT '[]';
    DECLARE CONTINUE HANDLER FOR 1062
    BEGIN
        GET DIAGNOSTICS CONDITION 1 msg = MESSAGE_TEXT;
        SET failed = 1062;
    END;
    DECLARE CONTINUE HANDLER FOR 4025 SET failed = 4025;

    SET n = JSON_LENGTH(batch), i = 0;
    insert_each: WHILE i < n DO
        SET o = JSON_EXTRACT(batch, CONCAT('$[', i, ']')), i = i + 1;
        SET no = JSON_VALUE(o, '$.n'), usr = JSON_VALUE(o, '$.u'), sess = JSON_VALUE(o, '$.s'),
            req = JSON_VALUE(o, '$.r'), qty = JSON_VALUE(o, '$.q'), tok = JSON_VALUE(o, '$.t'),
            missed = COALESCE(JSON_VALUE(o, '$.m'), 0), at = JSON_VALUE(o, '$.c');
        SET placed = JSON_ARRAY_APPEND(placed, '$', NULL);
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
        SET placed = JSON_SET(placed, CONCAT('$[', i - 1, ']'),
                              JSON_OBJECT('id', oid, 's', sess, 'q', qty, 'a', amount, 'm', missed));
    END WHILE;

    SET n = JSON_LENGTH(takes), j = 0;
    take_each: WHILE j < n DO
        SET i = JSON_VALUE(takes, CONCAT('$[', j, ']')), j = j + 1;
        SET o = JSON_EXTRACT(placed, CONCAT('$[', i, ']'));
        IF o IS NULL OR o = 'null' THEN
            ITERATE take_each;
        END IF;
        SET oid = JSON_VALUE(o, '$.id'), sess = JSON_VALUE(o, '$.s'), qty = JSON_VALUE(o, '$.q'),
            amount = JSON_VALUE(o, '$.a'), missed = JSON_VALUE(o, '$.m');
        IF NOT @@in_transaction THEN
            SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213,
                MESSAGE_TEXT = 'place_orders: the transaction was rolled back under it';
        END IF;
        SET failed = 0;
        UPDATE sessions SET stock = stock - qty, version = version + 1 WHERE id = sess;
        IF failed = 0 THEN
            SET outcomes = CONCAT(outcomes, i + 1, ' P ', oid, ' ', amount, ',');
            ITERATE take_each;
        END IF;
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
        SET outcomes = CONCAT(outcomes, i + 1, ' S,');
    END WHILE;
    SET @placed_orders = outcomes;
END //
DELIMITER ;
