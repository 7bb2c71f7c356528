-- What maintenance keeps belongs to the database, not to whoever calls it:
-- inbox_maintain ran with its owner's rights and took the retention from
-- its caller, so the application role could drop every ledger partition
-- (`inbox_maintain(-3, ...)`), and two deployments with different
-- INBOX_RETENTION_DAYS on one database undid each other's work. The
-- settings are written by `inventory-inbox migrate` as the owner; the
-- application role may read them and ask for maintenance, nothing more.
CREATE TABLE inbox_settings (
    -- One row.
    singleton             boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    -- Days of ledger partitions behind today: the dedup window.
    retention_days        integer NOT NULL CHECK (retention_days BETWEEN 1 AND 3650),
    -- Days of ledger partitions made ahead of today.
    premake_days          integer NOT NULL CHECK (premake_days BETWEEN 1 AND 30),
    -- Days a parked row is kept.
    parked_retention_days integer NOT NULL CHECK (parked_retention_days BETWEEN 1 AND 3650),
    -- Days after which a parked row's payload is cleared; 0 keeps it.
    parked_payload_days   integer NOT NULL CHECK (parked_payload_days BETWEEN 0 AND 3650),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
INSERT INTO inbox_settings (retention_days, premake_days, parked_retention_days,
                            parked_payload_days)
VALUES (14, 2, 30, 0);
GRANT SELECT ON inbox_settings TO inventory_app;

DROP FUNCTION inbox_maintain(integer, integer, integer, integer);

-- Creates the ledger partitions of [today - retention_days, today +
-- premake_days] and drops whole partitions older than that (never a
-- row-level DELETE on the ledger), as inbox_settings says. Only one caller
-- at a time does the work (transaction-scoped advisory lock); the others
-- return at once with locked = false. Parked rows are pruned apart
-- (inbox_prune_parked), in bounded steps, so that a large backlog of them
-- never holds the partitions back.
CREATE FUNCTION inbox_maintain(OUT locked boolean, OUT created integer, OUT dropped integer)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp SET timezone = 'UTC'
AS $$
DECLARE
    settings inbox_settings;
    oldest date;
    day date;
BEGIN
    created := 0;
    dropped := 0;
    locked := pg_try_advisory_xact_lock(hashtext('inventory-inbox:maintain'));
    IF NOT locked THEN
        RETURN;
    END IF;
    SELECT * INTO STRICT settings FROM inbox_settings;
    oldest := current_date - settings.retention_days;
    created := inbox_create_partitions(oldest, current_date + settings.premake_days);
    FOR day IN SELECT d FROM inbox_window_days() AS d WHERE d < oldest LOOP
        EXECUTE format('DROP TABLE %I', 'processed_inbox_p' || to_char(day, 'YYYYMMDD'));
        dropped := dropped + 1;
    END LOOP;
END;
$$;

-- Deletes at most max_rows parked rows older than parked_retention_days,
-- and clears the payloads of at most max_rows rows older than
-- parked_payload_days (when positive), oldest first. The caller repeats it
-- until both come back below max_rows.
CREATE FUNCTION inbox_prune_parked(max_rows integer, OUT deleted integer, OUT cleared integer)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp SET timezone = 'UTC'
AS $$
DECLARE
    settings inbox_settings;
BEGIN
    SELECT * INTO STRICT settings FROM inbox_settings;
    DELETE FROM inbox_parked
    WHERE id IN (SELECT id FROM inbox_parked
                 WHERE parked_at < now() - make_interval(days => settings.parked_retention_days)
                 ORDER BY id
                 LIMIT greatest(max_rows, 1));
    GET DIAGNOSTICS deleted = ROW_COUNT;
    cleared := 0;
    IF settings.parked_payload_days > 0 THEN
        UPDATE inbox_parked SET payload = NULL
        WHERE id IN (SELECT id FROM inbox_parked
                     WHERE payload IS NOT NULL
                       AND parked_at < now() - make_interval(days => settings.parked_payload_days)
                     ORDER BY id
                     LIMIT greatest(max_rows, 1));
        GET DIAGNOSTICS cleared = ROW_COUNT;
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION inbox_maintain() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION inbox_prune_parked(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_maintain() TO inventory_app;
GRANT EXECUTE ON FUNCTION inbox_prune_parked(integer) TO inventory_app;
