-- ticketd schema, version 4: dead letters can be re-driven.
--
-- `ticketd dead-letters replay` runs a dead letter's effect again, with its
-- dedup row, once its cause is fixed, and in the same transaction stamps the
-- letter here. A re-driven letter is then handled by its consume_records row
-- like any applied event; a letter with replayed_at NULL is still open and
-- is what `ticketd dead-letters list` shows. (This replaces deleting the row
-- and resetting the outbox row by hand, as 002 suggested.)
ALTER TABLE dead_letters
    ADD COLUMN replayed_at   DATETIME(3) NULL AFTER created_at,
    -- 'applied', or 'already applied' when the business key's dedup row
    -- existed already (another copy of the event got through first).
    ADD COLUMN replay_result VARCHAR(32) NULL AFTER replayed_at,
    ADD KEY ix_dead_letters_open (replayed_at, id);
