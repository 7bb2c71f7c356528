-- The inventory inbox: stock, the idempotency ledger, reservations and the
-- parked records (SPEC §5).
--
-- Why the ledger is partitioned by event_day and not by processed_at:
-- PostgreSQL requires every unique key of a partitioned table to contain the
-- partition key. Partitioned by the time of processing, the primary key would
-- have to be (processed_at, consumer, message_id), and a redelivery, processed
-- at a later instant, would never conflict with the first delivery: the
-- duplicate would be applied again. The partition key must be a function of
-- the event itself so that every delivery of an event lands on the same key;
-- event_day (the UTC date of the event time) is, and it still lets old days be
-- dropped whole (no row-level DELETE) when they leave the dedup window.
--
-- Identifier columns (SKUs, order ids, consumer and topic names) compare
-- byte-wise (COLLATE "C"): they are codes, not words, and their primary-key
-- indexes are probed hundreds of times per batch, where a linguistic
-- collation costs several times more per comparison.

CREATE TABLE inventory_stock (
    sku        text COLLATE "C" PRIMARY KEY,
    on_hand    bigint NOT NULL CHECK (on_hand >= 0),
    reserved   bigint NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT reserved_within_on_hand CHECK (reserved <= on_hand)
);

CREATE TABLE processed_inbox (
    event_day       date        NOT NULL,
    consumer        text        COLLATE "C" NOT NULL,
    message_id      uuid        NOT NULL,
    event_type      text        NOT NULL,
    aggregate_id    text        COLLATE "C" NOT NULL,
    topic           text        NOT NULL,
    kafka_partition integer     NOT NULL,
    kafka_offset    bigint      NOT NULL,
    -- processed: at least one new order line recorded;
    -- business_duplicate: every (order_id, sku) was already reserved.
    status          text        NOT NULL CHECK (status IN ('processed', 'business_duplicate')),
    -- FNV-1a of the raw payload: tells a redelivery from a reused id.
    payload_hash    bigint      NOT NULL,
    processed_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (event_day, consumer, message_id)
) PARTITION BY RANGE (event_day);

CREATE TABLE order_reservation (
    order_id   text        COLLATE "C" NOT NULL,
    -- No foreign key to inventory_stock: the batch has already locked every
    -- SKU it reserves (unknown SKUs are parked), and a per-row RI trigger
    -- would cost more than the rest of the batch's insert.
    sku        text        COLLATE "C" NOT NULL,
    quantity   integer     NOT NULL CHECK (quantity BETWEEN 1 AND 10000),
    status     text        NOT NULL CHECK (status IN ('reserved', 'rejected')),
    message_id uuid        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (order_id, sku)
);

CREATE TABLE inbox_parked (
    id              bigserial   PRIMARY KEY,
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
    -- Parking is idempotent on redelivery of the same record.
    UNIQUE (consumer, topic, kafka_partition, kafka_offset)
);

CREATE INDEX inbox_parked_reason_idx ON inbox_parked (reason, parked_at);

-- Creates the daily ledger partitions of [first_day, last_day] that are
-- missing. Returns how many it created.
CREATE FUNCTION inbox_create_partitions(first_day date, last_day date)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    day date := first_day;
    created integer := 0;
    name text;
BEGIN
    WHILE day <= last_day LOOP
        name := 'processed_inbox_p' || to_char(day, 'YYYYMMDD');
        IF to_regclass(name) IS NULL THEN
            EXECUTE format(
                'CREATE TABLE %I PARTITION OF processed_inbox FOR VALUES FROM (%L) TO (%L)',
                name, day, day + 1);
            created := created + 1;
        END IF;
        day := day + 1;
    END LOOP;
    RETURN created;
END;
$$;

-- The days that have a ledger partition: the dedup window (SPEC §7).
CREATE FUNCTION inbox_window_days()
RETURNS SETOF date
LANGUAGE sql STABLE AS $$
    SELECT to_date(substr(c.relname, length('processed_inbox_p') + 1), 'YYYYMMDD')
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'processed_inbox'::regclass
      AND c.relname ~ '^processed_inbox_p[0-9]{8}$'
    ORDER BY 1
$$;

-- Maintenance, relative to the database's current_date: creates the ledger
-- partitions of [today - retention_days, today + premake_days] and drops whole
-- partitions older than that (never a row-level DELETE on the ledger); deletes
-- parked rows older than parked_retention_days and, when parked_payload_days
-- is positive, nulls out the payloads of parked rows older than that. Only one
-- caller at a time does the work (transaction-scoped advisory lock); the
-- others return at once with locked = false.
CREATE FUNCTION inbox_maintain(retention_days integer, premake_days integer,
                               parked_retention_days integer, parked_payload_days integer,
                               OUT locked boolean, OUT created integer, OUT dropped integer,
                               OUT parked_deleted integer, OUT payloads_cleared integer)
LANGUAGE plpgsql AS $$
DECLARE
    oldest date := current_date - retention_days;
    day date;
BEGIN
    created := 0;
    dropped := 0;
    parked_deleted := 0;
    payloads_cleared := 0;
    locked := pg_try_advisory_xact_lock(hashtext('inventory-inbox:maintain'));
    IF NOT locked THEN
        RETURN;
    END IF;
    created := inbox_create_partitions(oldest, current_date + premake_days);
    FOR day IN SELECT d FROM inbox_window_days() AS d WHERE d < oldest LOOP
        EXECUTE format('DROP TABLE %I', 'processed_inbox_p' || to_char(day, 'YYYYMMDD'));
        dropped := dropped + 1;
    END LOOP;
    DELETE FROM inbox_parked WHERE parked_at < now() - make_interval(days => parked_retention_days);
    GET DIAGNOSTICS parked_deleted = ROW_COUNT;
    IF parked_payload_days > 0 THEN
        UPDATE inbox_parked SET payload = NULL
        WHERE payload IS NOT NULL
          AND parked_at < now() - make_interval(days => parked_payload_days);
        GET DIAGNOSTICS payloads_cleared = ROW_COUNT;
    END IF;
END;
$$;
