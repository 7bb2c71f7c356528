-- Months of traffic (SPEC §14, docs/design.md#storage): every table bounded
-- and pruned whole, and fewer bytes per event.
--
-- The ledger (processed_inbox) keeps its name, its daily partitions and its
-- columns, in smaller types: the consumer and the topic as codes of
-- inbox_consumer and inbox_topic (a row carried both names as text, 33
-- bytes, twice with the consumer in the key), the status as one byte
-- (instead of 10-19); the event type, always OrderPlaced (any other is
-- parked), is no longer stored: the view inbox_ledger spells them out. Its
-- primary key leads with the message id, so that the one index serves both the insert's conflict check
-- and the look-up of an id on every day of the window: the separate
-- idx_inbox_message_lookup (46 bytes an event) goes.
--
-- The reservations (order_reservation) are partitioned by the day they were
-- made (reserved_day, UTC), in daily partitions order_reservation_pYYYYMMDD,
-- kept reservation_retention_days and then dropped or detached whole. A
-- partitioned table cannot hold (order_id, sku) unique across its days;
-- the batch keeps it so (sql/apply_batch.sql: a line is written only under
-- the lock of its SKU's stock row, and looked up once that lock is held),
-- and the one index, on order_id, serves that look-up: with its duplicates
-- folded (B-tree deduplication), the lines of an order cost one entry.
--
-- The tables' rows are copied (a rewrite of both tables, once).

-- "Today" of maintenance and of the reservations' days: the database's
-- date in UTC, whatever the session's time zone. (Inlined where it is
-- called: no SET clause, no function call per row.)
CREATE FUNCTION inbox_today()
RETURNS date
LANGUAGE sql STABLE
AS $$ SELECT (now() AT TIME ZONE 'UTC')::date $$;

CREATE TABLE inbox_consumer (
    code smallint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text COLLATE "C" NOT NULL UNIQUE
);
CREATE TABLE inbox_topic (
    code smallint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text COLLATE "C" NOT NULL UNIQUE
);

-- The code of a consumer name or a topic, made at its first use.
CREATE FUNCTION inbox_consumer_code(consumer_name text)
RETURNS smallint
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp
AS $$
DECLARE
    found smallint;
BEGIN
    SELECT code INTO found FROM inbox_consumer WHERE name = consumer_name;
    IF found IS NULL THEN
        INSERT INTO inbox_consumer (name) VALUES (consumer_name) ON CONFLICT (name) DO NOTHING;
        SELECT code INTO STRICT found FROM inbox_consumer WHERE name = consumer_name;
    END IF;
    RETURN found;
END;
$$;

CREATE FUNCTION inbox_topic_code(topic_name text)
RETURNS smallint
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp
AS $$
DECLARE
    found smallint;
BEGIN
    SELECT code INTO found FROM inbox_topic WHERE name = topic_name;
    IF found IS NULL THEN
        INSERT INTO inbox_topic (name) VALUES (topic_name) ON CONFLICT (name) DO NOTHING;
        SELECT code INTO STRICT found FROM inbox_topic WHERE name = topic_name;
    END IF;
    RETURN found;
END;
$$;

CREATE TYPE inbox_line_status AS ENUM ('reserved', 'rejected');

-- The old tables step aside, their partitions renamed so that the new ones
-- take the names.
ALTER TABLE processed_inbox RENAME TO processed_inbox_v1;
DO $$
DECLARE
    child text;
BEGIN
    FOR child IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                 WHERE i.inhparent = 'processed_inbox_v1'::regclass LOOP
        EXECUTE format('ALTER TABLE %I RENAME TO %I', child, child || '_v1');
    END LOOP;
END
$$;
ALTER TABLE order_reservation RENAME TO order_reservation_v1;

-- Columns in order of alignment: no padding between them.
CREATE TABLE processed_inbox (
    message_id      uuid                NOT NULL,
    kafka_offset    bigint              NOT NULL,
    -- FNV-1a of the raw payload: tells a redelivery from a reused id.
    payload_hash    bigint              NOT NULL,
    processed_at    timestamptz         NOT NULL DEFAULT clock_timestamp(),
    event_day       date                NOT NULL,
    kafka_partition integer             NOT NULL,
    -- One byte: 'p' processed (at least one new order line recorded), 'd'
    -- business_duplicate (every (order_id, sku) was already reserved); the
    -- view inbox_ledger spells it out. (An enum takes 4 bytes, which pushes
    -- a row with an order id of 16 to 19 characters past an 8-byte boundary.)
    status          "char"              NOT NULL CHECK (status IN ('p', 'd')),
    -- inbox_consumer.code, inbox_topic.code
    consumer        smallint            NOT NULL,
    topic           smallint            NOT NULL,
    aggregate_id    text                COLLATE "C" NOT NULL,
    PRIMARY KEY (message_id, consumer, event_day)
) PARTITION BY RANGE (event_day);

CREATE TABLE order_reservation (
    created_at   timestamptz       NOT NULL DEFAULT now(),
    message_id   uuid              NOT NULL,
    -- The UTC day the line was reserved (or rejected): its partition.
    reserved_day date              NOT NULL,
    status       inbox_line_status NOT NULL,
    quantity     smallint          NOT NULL CHECK (quantity BETWEEN 1 AND 10000),
    order_id     text              COLLATE "C" NOT NULL,
    -- No foreign key to inventory_stock: the batch has already locked every
    -- SKU it reserves (unknown SKUs are parked), and a per-row RI trigger
    -- would cost more than the rest of the batch's insert.
    sku          text              COLLATE "C" NOT NULL
) PARTITION BY RANGE (reserved_day);
CREATE INDEX order_reservation_order_idx ON order_reservation (order_id);

-- The order lines of the dedup window's days that name one of these
-- orders. VOLATILE, so that it reads with a snapshot of its own, taken when
-- it is called: the batch calls it once it holds the locks of its SKUs
-- (`locked`, passed only to order the call after them), when a batch wrote
-- one of those rows since the batch's own snapshot.
CREATE FUNCTION inbox_reservations_of(orders text[], locked bigint)
RETURNS TABLE (order_id text, sku text)
LANGUAGE plpgsql VOLATILE
SET search_path = public, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT DISTINCT o.order_id, o.sku
    FROM order_reservation o
    WHERE o.order_id = ANY (orders)
      AND o.reserved_day >= (SELECT inbox_today() - s.retention_days FROM inbox_settings s);
END;
$$;

-- Creates the daily partitions of [first_day, last_day] that are missing:
-- the ledger's and the reservations'. Returns how many it created.
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
        FOREACH parent IN ARRAY ARRAY['processed_inbox', 'order_reservation'] LOOP
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

-- The rows, copied.
SELECT inbox_create_partitions(min(event_day), max(event_day)) FROM processed_inbox_v1
HAVING count(*) > 0;
SELECT inbox_create_partitions(min((created_at AT TIME ZONE 'UTC')::date),
                               max((created_at AT TIME ZONE 'UTC')::date))
FROM order_reservation_v1
HAVING count(*) > 0;
SELECT inbox_consumer_code(consumer) FROM (SELECT DISTINCT consumer FROM processed_inbox_v1) c;
SELECT inbox_topic_code(topic) FROM (SELECT DISTINCT topic FROM processed_inbox_v1) t;
INSERT INTO processed_inbox (message_id, kafka_offset, payload_hash, processed_at, event_day,
                             kafka_partition, status, consumer, topic, aggregate_id)
SELECT o.message_id, o.kafka_offset, o.payload_hash, o.processed_at, o.event_day,
       o.kafka_partition,
       CASE o.status WHEN 'processed' THEN 'p' ELSE 'd' END::"char", c.code, t.code, o.aggregate_id
FROM processed_inbox_v1 o
JOIN inbox_consumer c ON c.name = o.consumer
JOIN inbox_topic t ON t.name = o.topic;
INSERT INTO order_reservation (created_at, message_id, reserved_day, status, quantity,
                               order_id, sku)
SELECT created_at, message_id, (created_at AT TIME ZONE 'UTC')::date,
       status::inbox_line_status, quantity, order_id, sku
FROM order_reservation_v1;
-- The partitions of days with no rows that the old window had.
SELECT inbox_create_partitions(min(d), max(d))
FROM (SELECT to_date(substr(c.relname, length('processed_inbox_p') + 1, 8), 'YYYYMMDD') AS d
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'processed_inbox_v1'::regclass) AS days
HAVING count(*) > 0;
DROP TABLE processed_inbox_v1;
DROP TABLE order_reservation_v1;

-- The days that have a ledger partition: the dedup window (SPEC §7).
CREATE OR REPLACE FUNCTION inbox_window_days()
RETURNS SETOF date
LANGUAGE sql STABLE AS $$
    SELECT to_date(substr(c.relname, length('processed_inbox_p') + 1), 'YYYYMMDD')
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'processed_inbox'::regclass
      AND c.relname ~ '^processed_inbox_p[0-9]{8}$'
    ORDER BY 1
$$;

-- The days that have a reservation partition.
CREATE FUNCTION inbox_reservation_days()
RETURNS SETOF date
LANGUAGE sql STABLE AS $$
    SELECT to_date(substr(c.relname, length('order_reservation_p') + 1), 'YYYYMMDD')
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'order_reservation'::regclass
      AND c.relname ~ '^order_reservation_p[0-9]{8}$'
    ORDER BY 1
$$;

-- The reservations' retention: days of reservation partitions behind today
-- (never fewer than the dedup window's: a business duplicate is recognised
-- across the whole window), and whether an expired partition is dropped or
-- detached (left as a table of its own for an archive to take).
ALTER TABLE inbox_settings
    ADD COLUMN reservation_retention_days integer NOT NULL DEFAULT 14
        CHECK (reservation_retention_days BETWEEN 1 AND 3650),
    ADD COLUMN reservation_expiry text NOT NULL DEFAULT 'drop'
        CHECK (reservation_expiry IN ('drop', 'detach'));
UPDATE inbox_settings
SET reservation_retention_days = greatest(reservation_retention_days, retention_days);
ALTER TABLE inbox_settings
    ADD CONSTRAINT reservations_cover_the_window
        CHECK (reservation_retention_days >= retention_days);

CREATE OR REPLACE FUNCTION inbox_create_window(OUT locked boolean, OUT created integer)
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
    created := inbox_create_partitions(inbox_today() - settings.retention_days,
                                       inbox_today() + settings.premake_days);
END;
$$;

-- Drops whole ledger partitions older than the window, and drops (or
-- detaches) whole reservation partitions older than their retention; never
-- a row-level DELETE. Under the maintenance lock.
CREATE OR REPLACE FUNCTION inbox_drop_expired(OUT locked boolean, OUT dropped integer)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp SET timezone = 'UTC'
AS $$
DECLARE
    settings inbox_settings;
    day date;
    name text;
BEGIN
    dropped := 0;
    locked := pg_try_advisory_xact_lock(hashtext('inventory-inbox:maintain'));
    IF NOT locked THEN
        RETURN;
    END IF;
    SELECT * INTO STRICT settings FROM inbox_settings;
    FOR day IN SELECT d FROM inbox_window_days() AS d
               WHERE d < inbox_today() - settings.retention_days LOOP
        EXECUTE format('DROP TABLE %I', 'processed_inbox_p' || to_char(day, 'YYYYMMDD'));
        dropped := dropped + 1;
    END LOOP;
    FOR day IN SELECT d FROM inbox_reservation_days() AS d
               WHERE d < inbox_today() - settings.reservation_retention_days LOOP
        name := 'order_reservation_p' || to_char(day, 'YYYYMMDD');
        IF settings.reservation_expiry = 'detach' THEN
            EXECUTE format('ALTER TABLE order_reservation DETACH PARTITION %I', name);
        ELSE
            EXECUTE format('DROP TABLE %I', name);
        END IF;
        dropped := dropped + 1;
    END LOOP;
END;
$$;

-- The ledger with names for people: what processed_inbox holds, the codes
-- spelled out.
CREATE VIEW inbox_ledger AS
SELECT l.event_day, c.name AS consumer, l.message_id, 'OrderPlaced'::text AS event_type,
       l.aggregate_id, t.name AS topic, l.kafka_partition, l.kafka_offset,
       CASE l.status WHEN 'p' THEN 'processed' ELSE 'business_duplicate' END AS status, l.payload_hash, l.processed_at
FROM processed_inbox l
JOIN inbox_consumer c ON c.code = l.consumer
JOIN inbox_topic t ON t.code = l.topic;

GRANT SELECT, INSERT ON processed_inbox TO inventory_app;
GRANT SELECT, INSERT ON order_reservation TO inventory_app;
GRANT SELECT ON inbox_consumer, inbox_topic, inbox_ledger TO inventory_app;
REVOKE EXECUTE ON FUNCTION inbox_consumer_code(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION inbox_topic_code(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION inbox_create_partitions(date, date) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_consumer_code(text) TO inventory_app;
GRANT EXECUTE ON FUNCTION inbox_topic_code(text) TO inventory_app;
GRANT EXECUTE ON FUNCTION inbox_reservation_days() TO inventory_app;
GRANT EXECUTE ON FUNCTION inbox_today() TO inventory_app;
REVOKE EXECUTE ON FUNCTION inbox_reservations_of(text[], bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_reservations_of(text[], bigint) TO inventory_app;
