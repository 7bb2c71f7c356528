-- The last maintenance runs and their results, for the operator (the
-- console's overview, docs/operations.md#console): each run of maintenance
-- (`run`'s at start-up and hourly, `inventory-inbox maintain`, `migrate`) is
-- a row, written when it starts and completed when it ends, with what it did
-- or the error that stopped it. A row never completed is a run that is still
-- going or whose process stopped.
--
-- Bounded by count, not by time: the row a run starts with deletes, in the
-- same statement, the rows more than the last few hundred runs back (a few
-- hundred small rows whatever the months; sql/maintenance_begun.sql). A run
-- that did no work because another instance held the lock is a row too.
CREATE TABLE inbox_maintenance_run (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- What started it: `migrate`, `maintain`, `run: start-up`, `run: hourly`.
    started_by       text        NOT NULL,
    finished_at      timestamptz,
    -- False: another instance held the maintenance lock; nothing was done.
    locked           boolean,
    -- Ledger, reservation and parked partitions made ahead and dropped.
    created          integer,
    dropped          integer,
    parked_deleted   integer,
    payloads_cleared integer,
    -- Why it stopped, when it failed; NULL when it ended well.
    error            text
);
GRANT SELECT, INSERT, UPDATE, DELETE ON inbox_maintenance_run TO inventory_app;
GRANT SELECT ON inbox_maintenance_run TO inventory_operator;
