-- ticketd schema, version 10: the durable idempotency records (007) are
-- partitioned by day like the other records kept for a window (008), so a
-- day past TICKETD_RETAIN_IDEMPOTENCY_RECORDS_H goes with DROP PARTITION,
-- never a DELETE over a range.
--
-- created_day has been part of the primary key since 007 (MariaDB wants
-- the partitioning column in every unique key), and the service writes a
-- key's later answers into the row of the day it was first written: no
-- key or row changes here, the rows already there stay, in p_future, until
-- the retention job splits the coming days off it. Beyond a record's
-- window the business table answers: a cart's retry finds each item's
-- order under its item key (uq_orders_user_request) and is answered the
-- same, and a fresh record is written under today's day.
ALTER TABLE idempotency_records
    PARTITION BY RANGE (TO_DAYS(created_day)) (PARTITION p_future VALUES LESS THAN MAXVALUE);
