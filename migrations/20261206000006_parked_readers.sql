-- Who may read parked records (docs/operations.md#who-may-read-parked-records).
-- A parked row keeps a customer's order as it came: its payload (bounded),
-- its headers (secrets redacted) and its key. Two roles for people, both
-- read-only, made here like inventory_app (NOLOGIN: grant them to login
-- roles; where the owner may not create roles, a DBA creates them first):
--   inventory_operator        reads every table the operator commands read
--                             and the parked rows without their payload,
--                             headers and key: reason, error, position,
--                             message id, replays, DLQ state;
--   inventory_parked_reader   is an inventory_operator that reads the
--                             payload, headers and key as well.
-- The grants on inbox_parked are column by column: a column added later
-- is readable by neither until its migration grants it.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'inventory_operator') THEN
        CREATE ROLE inventory_operator NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'inventory_parked_reader') THEN
        CREATE ROLE inventory_parked_reader NOLOGIN IN ROLE inventory_operator;
    END IF;
EXCEPTION
    -- Another database's migration created them at the same moment.
    WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;

GRANT SELECT ON processed_inbox, order_reservation, inventory_stock, inbox_position,
                inbox_consumer, inbox_topic, inbox_settings, inbox_breaker
    TO inventory_operator;
GRANT SELECT (id, parked_day, consumer, topic, kafka_partition, kafka_offset, message_id,
              reason, error, parked_at, replayed_at, replay_outcome, trace_id, dlq_sent_at)
    ON inbox_parked TO inventory_operator;
GRANT SELECT (payload, headers, record_key) ON inbox_parked TO inventory_parked_reader;
