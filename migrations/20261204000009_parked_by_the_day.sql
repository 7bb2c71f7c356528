-- The parked rows go by whole days too (SPEC §14, docs/design.md#storage):
-- a producer that breaks parks every record it sends, at full speed, and a
-- row-level DELETE of a day of those is the bulk delete the storage rules
-- forbid. inbox_parked is partitioned by the day a record was parked
-- (parked_day, UTC), in daily partitions inbox_parked_pYYYYMMDD, and a day
-- older than parked_retention_days is dropped whole.
--
-- Parking stays idempotent on redelivery: the batch parks a record only
-- when no kept day holds it (the unique key holds the day; two members
-- parking one record in the same day still conflict). Ids keep their
-- sequence; every id look-up (`parked list`, `replay`, the DLQ copies)
-- goes through the primary key (id, parked_day).
--
-- The rows are copied (a rewrite of the table, once).

ALTER TABLE inbox_parked RENAME TO inbox_parked_v1;
ALTER INDEX inbox_parked_reason_idx RENAME TO inbox_parked_v1_reason_idx;
ALTER INDEX inbox_parked_dlq_owed_idx RENAME TO inbox_parked_v1_dlq_owed_idx;

CREATE TABLE inbox_parked (
    id              bigint      NOT NULL DEFAULT nextval('inbox_parked_id_seq'),
    -- The UTC day it was parked: its partition.
    parked_day      date        NOT NULL,
    consumer        text        NOT NULL,
    topic           text        NOT NULL,
    kafka_partition integer     NOT NULL,
    kafka_offset    bigint      NOT NULL,
    message_id      uuid,
    reason          text        NOT NULL,
    error           text        NOT NULL,
    -- Raw bytes, at most 64 KiB (larger payloads are truncated).
    payload         bytea,
    -- Record headers as a JSON object, secrets redacted.
    headers         jsonb       NOT NULL DEFAULT '{}',
    parked_at       timestamptz NOT NULL DEFAULT now(),
    -- Set when an operator replays the record (`inventory-inbox parked replay`).
    replayed_at     timestamptz,
    replay_outcome  text,
    trace_id        text,
    record_key      bytea,
    dlq_sent_at     timestamptz,
    PRIMARY KEY (id, parked_day),
    UNIQUE (consumer, topic, kafka_partition, kafka_offset, parked_day)
) PARTITION BY RANGE (parked_day);
ALTER SEQUENCE inbox_parked_id_seq OWNED BY inbox_parked.id;
CREATE INDEX inbox_parked_reason_idx ON inbox_parked (reason, parked_at);
CREATE INDEX inbox_parked_dlq_owed_idx ON inbox_parked (consumer, topic, kafka_partition, id)
    WHERE dlq_sent_at IS NULL;

-- Creates the daily partitions of [first_day, last_day] that are missing:
-- the ledger's and the reservations'; the parked rows' from today on (a
-- record is parked on the day it is read). Returns how many it created.
CREATE OR REPLACE FUNCTION inbox_create_partitions(first_day date, last_day date)
RETURNS integer
LANGUAGE plpgsql
SET search_path = public, pg_temp
AS $$
DECLARE
    day date := first_day;
    created integer := 0;
    parent text;
    name text;
BEGIN
    WHILE day <= last_day LOOP
        FOREACH parent IN ARRAY ARRAY['processed_inbox', 'order_reservation', 'inbox_parked'] LOOP
            CONTINUE WHEN parent = 'inbox_parked' AND day < inbox_today();
            name := parent || '_p' || to_char(day, 'YYYYMMDD');
            IF to_regclass(name) IS NULL THEN
                EXECUTE format(
                    'CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                    name, parent, day, day + 1);
                created := created + 1;
            END IF;
        END LOOP;
        day := day + 1;
    END LOOP;
    RETURN created;
END;
$$;

-- The rows, copied, each day of them into its partition.
DO $$
DECLARE
    day date;
BEGIN
    FOR day IN SELECT DISTINCT (parked_at AT TIME ZONE 'UTC')::date FROM inbox_parked_v1 LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF inbox_parked FOR VALUES FROM (%L) TO (%L)',
                       'inbox_parked_p' || to_char(day, 'YYYYMMDD'), day, day + 1);
    END LOOP;
END
$$;
SELECT inbox_create_partitions(inbox_today(), inbox_today() + 2);
INSERT INTO inbox_parked (id, parked_day, consumer, topic, kafka_partition, kafka_offset,
                          message_id, reason, error, payload, headers, parked_at, replayed_at,
                          replay_outcome, trace_id, record_key, dlq_sent_at)
SELECT id, (parked_at AT TIME ZONE 'UTC')::date, consumer, topic, kafka_partition, kafka_offset,
       message_id, reason, error, payload, headers, parked_at, replayed_at, replay_outcome,
       trace_id, record_key, dlq_sent_at
FROM inbox_parked_v1;
DROP TABLE inbox_parked_v1;

-- The days that have a parked-row partition.
CREATE FUNCTION inbox_parked_days()
RETURNS SETOF date
LANGUAGE sql STABLE AS $$
    SELECT to_date(substr(c.relname, length('inbox_parked_p') + 1), 'YYYYMMDD')
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'inbox_parked'::regclass
      AND c.relname ~ '^inbox_parked_p[0-9]{8}$'
    ORDER BY 1
$$;

-- The day a batch writes its reservations and parked rows under: today,
-- or, should maintenance have failed for longer than the days it makes
-- ahead, the newest day that has a partition (a batch never fails for a
-- missing day).
CREATE FUNCTION inbox_write_day(parent text)
RETURNS date
LANGUAGE plpgsql STABLE
SET search_path = public, pg_temp
AS $$
DECLARE
    today date := inbox_today();
BEGIN
    IF to_regclass(parent || '_p' || to_char(today, 'YYYYMMDD')) IS NOT NULL THEN
        RETURN today;
    END IF;
    RETURN (SELECT max(to_date(substr(c.relname, length(parent) + 3), 'YYYYMMDD'))
            FROM pg_inherits i
            JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = parent::regclass
              AND c.relname ~ ('^' || parent || '_p[0-9]{8}$'));
END;
$$;

-- Drops whole parked-row partitions older than parked_retention_days (their
-- rows counted first: a second call finds none), and clears the payloads of at most max_rows rows
-- older than parked_payload_days (when positive), oldest first, under the
-- maintenance lock. The caller repeats it until both come back below
-- max_rows.
CREATE OR REPLACE FUNCTION inbox_prune_parked(max_rows integer, OUT deleted integer,
                                              OUT cleared integer)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp SET timezone = 'UTC'
AS $$
DECLARE
    settings inbox_settings;
    day date;
    name text;
    rows bigint;
BEGIN
    deleted := 0;
    cleared := 0;
    IF NOT pg_try_advisory_xact_lock(hashtext('inventory-inbox:maintain')) THEN
        RETURN;
    END IF;
    SELECT * INTO STRICT settings FROM inbox_settings;
    FOR day IN SELECT d FROM inbox_parked_days() AS d
               WHERE d < inbox_today() - settings.parked_retention_days LOOP
        name := 'inbox_parked_p' || to_char(day, 'YYYYMMDD');
        EXECUTE format('SELECT count(*) FROM %I', name) INTO rows;
        EXECUTE format('DROP TABLE %I', name);
        deleted := deleted + rows::integer;
    END LOOP;
    IF settings.parked_payload_days > 0 THEN
        UPDATE inbox_parked SET payload = NULL
        WHERE (id, parked_day) IN (
            SELECT id, parked_day FROM inbox_parked
            WHERE payload IS NOT NULL
              AND parked_at < now() - make_interval(days => settings.parked_payload_days)
            ORDER BY id
            LIMIT greatest(max_rows, 1));
        GET DIAGNOSTICS cleared = ROW_COUNT;
    END IF;
END;
$$;

GRANT SELECT, INSERT ON inbox_parked TO inventory_app;
GRANT UPDATE (dlq_sent_at) ON inbox_parked TO inventory_app;
GRANT EXECUTE ON FUNCTION inbox_parked_days() TO inventory_app;
REVOKE EXECUTE ON FUNCTION inbox_write_day(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_write_day(text) TO inventory_app;
