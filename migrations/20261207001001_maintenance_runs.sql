-- The last maintenance runs and their results, for the operator (the
-- console's overview, docs/operations.md#console): each run of maintenance
-- (`run`'s at start-up and hourly, `inventory-inbox maintain`, `migrate`) is
-- a row, written when it starts and completed when it ends, with what it did
-- or the error that stopped it. A row never completed is a run that is still
-- going or whose process stopped.
--
-- Bounded by count, not by time: the row a run starts with deletes, in the
-- same call, the rows more than the last few hundred runs back (a few
-- hundred small rows whatever the months). A run that did no work because
-- another instance held the lock is a row too.
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

-- Records that a run starts and deletes the runs more than `kept` back
-- (a row or so, by the primary key); the run's id. The service's role
-- writes the record through these two functions only: it can neither
-- delete the history nor rewrite a run that ended.
CREATE FUNCTION inbox_maintenance_begun(by_whom text, kept integer) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp
AS $$
DECLARE
    run bigint;
BEGIN
    INSERT INTO inbox_maintenance_run (started_by) VALUES (by_whom) RETURNING id INTO run;
    DELETE FROM inbox_maintenance_run WHERE id <= run - kept;
    RETURN run;
END;
$$;

-- Completes a run that has not ended with what it did, or its error.
CREATE FUNCTION inbox_maintenance_ended(run bigint, held boolean, made integer,
                                        gone integer, parked_gone integer,
                                        cleared integer, failure text) RETURNS void
LANGUAGE sql
SECURITY DEFINER SET search_path = public, pg_temp
AS $$
    UPDATE inbox_maintenance_run
    SET finished_at = clock_timestamp(), locked = held, created = made, dropped = gone,
        parked_deleted = parked_gone, payloads_cleared = cleared, error = failure
    WHERE id = run AND finished_at IS NULL;
$$;

REVOKE EXECUTE ON FUNCTION inbox_maintenance_begun(text, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION inbox_maintenance_ended(bigint, boolean, integer, integer, integer, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_maintenance_begun(text, integer) TO inventory_app;
GRANT EXECUTE ON FUNCTION inbox_maintenance_ended(bigint, boolean, integer, integer, integer, integer, text) TO inventory_app;
GRANT SELECT ON inbox_maintenance_run TO inventory_app, inventory_operator;
