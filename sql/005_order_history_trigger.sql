-- The history row of a new order is written by the database itself, in the
-- same statement (and so the same transaction) as the order: one round trip
-- less for the order transaction, and the row that holds the hot session's
-- lock (the stock compare-and-set) is followed only by COMMIT. Transitions
-- still write their own history rows (store_tx_transition).
CREATE TRIGGER trg_orders_history_create AFTER INSERT ON orders FOR EACH ROW
    INSERT INTO order_history (order_id, from_status, to_status, version, cause, created_at)
    VALUES (NEW.id, NULL, NEW.status, NEW.version, 'create', NEW.created_at);
