-- ticketd schema, version 17: leases that let one instance at a time do a
-- job's work that must not run twice at once.
--
-- The retention job runs in every instance. Its DDL (splitting day
-- partitions off p_future, dropping old ones) is the same in each, so two
-- instances that list the partitions at the same moment both send the same
-- ALTER: the second fails with a partition error on every node, after the
-- first replicated. On one server that is only wasted work; on Galera each
-- ALTER is replicated in total order and applied on every node, so the
-- losing ALTER fails on the appliers too (logged as an error there, then
-- ignored by wsrep). A round now takes this table's row for its job first,
-- in one statement (service/mysql/retention_mysql.c), and only the holder
-- sends DDL; the others measure and leave the changes to it.
--
-- A lease is a row, not a lock held by a connection: it survives the
-- holder's connection, replicates like any write (two nodes that take it
-- at once are a certification conflict, and the loser reads the winner's
-- row on its retry), and its expires_at is the database's clock, so the
-- instances' clocks do not matter. A holder that dies leaves it to run out.
CREATE TABLE job_leases (
    job        VARCHAR(32)  NOT NULL,
    holder     VARCHAR(128) NOT NULL,
    expires_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (job)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
