-- Least privilege: `run` works as the role inventory_app (or a login role
-- that is a member of it), which may only do what consuming needs:
--   ledger:        INSERT, SELECT, UPDATE of payload_hash only (the id-conflict
--                  check of insert_ledger.sql rewrites it unchanged)
--   reservations:  INSERT, SELECT (business duplicates)
--   stock:         SELECT, UPDATE (row locks and the aggregated update)
--   parked:        INSERT, SELECT
-- and no DDL at all: ledger partitions are created and dropped only through
-- inbox_maintain, which runs with its owner's rights (SECURITY DEFINER).
-- Migrations and operator commands (`migrate`, `parked replay`) run as the
-- owner. Where the owner may not create roles, a DBA creates inventory_app
-- (NOLOGIN) beforehand.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'inventory_app') THEN
        CREATE ROLE inventory_app NOLOGIN;
    END IF;
EXCEPTION
    -- Another database's migration created it at the same moment.
    WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;

GRANT SELECT, INSERT, UPDATE (payload_hash) ON processed_inbox TO inventory_app;
GRANT SELECT, INSERT ON order_reservation TO inventory_app;
GRANT SELECT, UPDATE ON inventory_stock TO inventory_app;
GRANT SELECT, INSERT ON inbox_parked TO inventory_app;
GRANT USAGE ON SEQUENCE inbox_parked_id_seq TO inventory_app;

ALTER FUNCTION inbox_maintain(integer, integer, integer, integer)
    SECURITY DEFINER SET search_path = public, pg_temp;
ALTER FUNCTION inbox_create_partitions(date, date) SET search_path = public, pg_temp;
REVOKE EXECUTE ON FUNCTION inbox_maintain(integer, integer, integer, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION inbox_create_partitions(date, date) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_maintain(integer, integer, integer, integer) TO inventory_app;
GRANT EXECUTE ON FUNCTION inbox_window_days() TO inventory_app;
