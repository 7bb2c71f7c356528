-- The filter of yesterday too (docs/design.md#the-filter-of-closed-days).
-- Until now a day's filter was built once the day was two days old, so
-- that no batch still writing the day without counting it could be running
-- (a statement does not run for a day); yesterday, one of the window's
-- days like any other once the clock passed midnight, was looked up in
-- full by every batch. Now a day is closed as soon as the database's clock
-- has passed its end, and its filter is built once every transaction that
-- could have written it uncounted has ended:
--
-- * the trigger counts a row as a late write when its day is over by the
--   clock at the end of the statement that wrote it (clock_timestamp, not
--   the statement's start), so a row written uncounted was written, and its
--   transaction given its id, before the day was over;
-- * closed_xid, set once the clock says the day is over, is a transaction
--   id that every transaction given one before that moment is below (one
--   given after the clock was read);
-- * a build reads the day only in a snapshot whose oldest running
--   transaction is at or above closed_xid: every transaction that could
--   have written the day uncounted has ended, and what it committed is in
--   the snapshot.

-- The day by the database's clock now (UTC), not at the start of the
-- statement or transaction as inbox_today().
CREATE FUNCTION inbox_clock_day()
RETURNS date
LANGUAGE sql VOLATILE
AS $$ SELECT (clock_timestamp() AT TIME ZONE 'UTC')::date $$;
GRANT EXECUTE ON FUNCTION inbox_clock_day() TO inventory_app;

-- Null until the day is over; then see above.
ALTER TABLE inbox_ledger_filter ADD COLUMN closed_xid xid8;

CREATE OR REPLACE FUNCTION inbox_ledger_late_write()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp
AS $$
DECLARE
    today date := inbox_clock_day();
BEGIN
    UPDATE inbox_ledger_filter f SET late_writes = f.late_writes + late.rows
    FROM (SELECT event_day, count(*) AS rows FROM written
          WHERE event_day < today GROUP BY event_day) AS late
    WHERE f.event_day = late.event_day;
    RETURN NULL;
END;
$$;

-- Closes the days that are over by the clock: sets their closed_xid to a
-- transaction id given to this transaction after the clock was read, so
-- above every id given before. Only in a transaction that had none (its own
-- statement, sent alone): an id given earlier could be below one a batch
-- took just before midnight, and it closes nothing then. Returns the days
-- closed.
CREATE FUNCTION inbox_ledger_filter_close()
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp
AS $$
DECLARE
    today date;
    closed integer;
    xid xid8;
BEGIN
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RETURN 0;
    END IF;
    today := inbox_clock_day();
    IF NOT EXISTS (SELECT FROM inbox_ledger_filter f
                   WHERE f.closed_xid IS NULL AND f.event_day < today) THEN
        RETURN 0;
    END IF;
    xid := pg_current_xact_id();
    UPDATE inbox_ledger_filter f
    SET closed_xid = xid
    WHERE f.closed_xid IS NULL AND f.event_day < today;
    GET DIAGNOSTICS closed = ROW_COUNT;
    RETURN closed;
END;
$$;
REVOKE EXECUTE ON FUNCTION inbox_ledger_filter_close() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_ledger_filter_close() TO inventory_app;
