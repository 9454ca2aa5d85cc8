-- ticketd schema, version 15: place_batch, a batch of new orders as one
-- statement, answered in one reply.
--
-- A batch was sent as `START TRANSACTION; CALL place_orders(?); SELECT
-- @placed_orders; COMMIT`: one round trip, but MariaDB writes a reply per
-- statement as each one ends (START's at once, the CALL's after the work,
-- the SELECT's, COMMIT's after the log flush), and the service's loop woke
-- for each. place_batch runs the same transaction itself and answers the
-- outcomes only after its COMMIT: the result set and the CALL's own OK
-- leave the server back to back, after the flush.
--
-- The work is place_orders' (sql/014_place_orders_lock_wait.sql), called
-- as it is; the outcomes are its (@placed_orders).
--
-- What can go wrong, and what the client is told:
--   - an error place_orders does not catch (a deadlock, its guard's 1213
--     when the server dropped the transaction under it), or the COMMIT's
--     own (a Galera certification conflict, 1213): the transaction is
--     rolled back here, before the error is passed on, so that a failed
--     CALL never leaves a transaction open on the connection. An error at
--     the COMMIT is passed on with its message prefixed "at COMMIT: ", so
--     that the service counts a certification conflict as one;
--   - the server rolled the transaction back without an error after the
--     last write (a Galera "brute force" abort): the COMMIT would answer OK
--     having committed nothing. Checked just before it, and refused with
--     SQLSTATE 45000 (1644), which the service answers "unavailable" (the
--     outcome unknown), as it did when it saw the same from the status
--     flag of the statement after the CALL.
DROP PROCEDURE IF EXISTS place_batch;
DELIMITER //
CREATE PROCEDURE place_batch(IN batch LONGTEXT)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
BEGIN
    DECLARE committing TINYINT DEFAULT 0;
    DECLARE msg TEXT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        GET DIAGNOSTICS CONDITION 1 msg = MESSAGE_TEXT;
        ROLLBACK;
        IF committing THEN
            SET msg = CONCAT('at COMMIT: ', msg);
            RESIGNAL SET MESSAGE_TEXT = msg;
        END IF;
        RESIGNAL;
    END;

    START TRANSACTION;
    CALL place_orders(batch);
    IF NOT @@in_transaction THEN
        SIGNAL SQLSTATE '45000'
            SET MESSAGE_TEXT = 'place_batch: the server rolled the transaction back without an error';
    END IF;
    SET committing = 1;
    COMMIT;
    SELECT @placed_orders;
END //
DELIMITER ;
