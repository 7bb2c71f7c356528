-- Maintenance in steps, each its own transaction: the partitions ahead are
-- made and committed before anything is dropped, so a DROP that waits too
-- long for a lock (a long query on the oldest day) never takes the new
-- days back with it; two days of such failures would otherwise leave
-- tomorrow's events without a partition (parked as event_time_in_future).
DROP FUNCTION inbox_maintain();

-- Creates the ledger partitions of [today - retention_days, today +
-- premake_days] that are missing, as inbox_settings says, under the
-- maintenance lock (the others return at once with locked = false).
CREATE FUNCTION inbox_create_window(OUT locked boolean, OUT created integer)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp SET timezone = 'UTC'
AS $$
DECLARE
    settings inbox_settings;
BEGIN
    created := 0;
    locked := pg_try_advisory_xact_lock(hashtext('inventory-inbox:maintain'));
    IF NOT locked THEN
        RETURN;
    END IF;
    SELECT * INTO STRICT settings FROM inbox_settings;
    created := inbox_create_partitions(current_date - settings.retention_days,
                                       current_date + settings.premake_days);
END;
$$;

-- Drops whole ledger partitions older than the window (never a row-level
-- DELETE on the ledger), under the maintenance lock.
CREATE FUNCTION inbox_drop_expired(OUT locked boolean, OUT dropped integer)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp SET timezone = 'UTC'
AS $$
DECLARE
    settings inbox_settings;
    day date;
BEGIN
    dropped := 0;
    locked := pg_try_advisory_xact_lock(hashtext('inventory-inbox:maintain'));
    IF NOT locked THEN
        RETURN;
    END IF;
    SELECT * INTO STRICT settings FROM inbox_settings;
    FOR day IN SELECT d FROM inbox_window_days() AS d
               WHERE d < current_date - settings.retention_days LOOP
        EXECUTE format('DROP TABLE %I', 'processed_inbox_p' || to_char(day, 'YYYYMMDD'));
        dropped := dropped + 1;
    END LOOP;
END;
$$;

REVOKE EXECUTE ON FUNCTION inbox_create_window() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION inbox_drop_expired() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_create_window() TO inventory_app;
GRANT EXECUTE ON FUNCTION inbox_drop_expired() TO inventory_app;
