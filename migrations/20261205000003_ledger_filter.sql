-- A filter of the message ids of each closed day of the ledger
-- (docs/design.md#the-filter-of-closed-days). Every batch looks each of its
-- ids up on every day of the dedup window; on a day of history that is a
-- random page of that day's primary key, cold once the window outgrows
-- memory. A closed day (two days before today, or older) takes few writes
-- more, so maintenance builds once a blocked Bloom filter of its ids
-- (~10 bits an id, ~1 % false positives) and the batch looks an id up on a
-- closed day only when the filter may hold it.
--
-- Exact, not probable: a filter never misses an id it was built with, and
-- every ledger row written into a day of history after its filter was read
-- (a late event) counts in late_writes, by a trigger, whoever writes it. A
-- filter is used only while late_writes is what it was built with;
-- otherwise the day is looked up in full until maintenance builds it again.

-- One row per day of the ledger, made with its partition, deleted with it.
CREATE TABLE inbox_ledger_filter (
    event_day    date        PRIMARY KEY,
    -- Ledger rows written into the day once it was a day old or older.
    late_writes  bigint      NOT NULL DEFAULT 0,
    -- late_writes as the filter's build read it; null: never built.
    built_writes bigint,
    -- Ids in the filter, and its chunks (0: the day held none).
    ids          bigint,
    chunks       integer,
    built_at     timestamptz
);

-- The filter of a day, in chunks of 62 blocks of 512 bits (3,968 bytes:
-- two rows to a page, stored in line, never compressed).
CREATE TABLE inbox_ledger_filter_chunk (
    event_day date    NOT NULL REFERENCES inbox_ledger_filter ON DELETE CASCADE,
    chunk     integer NOT NULL,
    bits      bytea   NOT NULL,
    PRIMARY KEY (event_day, chunk)
);
ALTER TABLE inbox_ledger_filter_chunk ALTER COLUMN bits SET STORAGE PLAIN;

-- Whether a day's filter chunk may hold an id, given the id's two hashes
-- (uuid_hash_extended with seeds 0 and 1; the chunk is h1 mod chunks): its
-- block is the high half of h1 mod 62, and its 7 bits in the block are
-- a + i*b mod 512 for i in 0..6, a and b from h2 (b odd). The maintenance
-- that builds filters (src/store/filter.rs) sets the same bits.
CREATE FUNCTION inbox_filter_may_hold(bits bytea, h1 bigint, h2 bigint)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN get_bit(bits, (((h1 >> 32) & 2147483647) % 62) * 512 + (h2 & 511)) = 1
   AND get_bit(bits, (((h1 >> 32) & 2147483647) % 62) * 512
                     + (((h2 & 511) + 1 * (((h2 >> 9) & 511) | 1)) & 511)) = 1
   AND get_bit(bits, (((h1 >> 32) & 2147483647) % 62) * 512
                     + (((h2 & 511) + 2 * (((h2 >> 9) & 511) | 1)) & 511)) = 1
   AND get_bit(bits, (((h1 >> 32) & 2147483647) % 62) * 512
                     + (((h2 & 511) + 3 * (((h2 >> 9) & 511) | 1)) & 511)) = 1
   AND get_bit(bits, (((h1 >> 32) & 2147483647) % 62) * 512
                     + (((h2 & 511) + 4 * (((h2 >> 9) & 511) | 1)) & 511)) = 1
   AND get_bit(bits, (((h1 >> 32) & 2147483647) % 62) * 512
                     + (((h2 & 511) + 5 * (((h2 >> 9) & 511) | 1)) & 511)) = 1
   AND get_bit(bits, (((h1 >> 32) & 2147483647) % 62) * 512
                     + (((h2 & 511) + 6 * (((h2 >> 9) & 511) | 1)) & 511)) = 1;

-- Counts the ledger rows a statement wrote into days a day old or older,
-- one update per day per statement (a batch's late rows, after midnight or
-- in a replay, cost one row lock, held from the end of its statement to its
-- commit). The filters are built for days two days old or older, so a row
-- the build of its day did not see (committed after the build's snapshot)
-- was written while its day was a day old at least (a statement does not
-- run for a day): it is counted, and the filter it missed is not used.
-- Rows written into a partition directly, not through processed_inbox,
-- are not counted: only the owner can, and a restore brings the filters'
-- rows with the ledger's.
CREATE FUNCTION inbox_ledger_late_write()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp
AS $$
BEGIN
    UPDATE inbox_ledger_filter f SET late_writes = f.late_writes + late.rows
    FROM (SELECT event_day, count(*) AS rows FROM written
          WHERE event_day < inbox_today() GROUP BY event_day) AS late
    WHERE f.event_day = late.event_day;
    RETURN NULL;
END;
$$;
REVOKE EXECUTE ON FUNCTION inbox_ledger_late_write() FROM PUBLIC;
CREATE TRIGGER inbox_ledger_late_write
AFTER INSERT ON processed_inbox
REFERENCING NEW TABLE AS written
FOR EACH STATEMENT
EXECUTE FUNCTION inbox_ledger_late_write();

-- Publishes a day's filter, built from what the ledger held of the day in
-- a snapshot in which late_writes was `built_writes`, in one transaction
-- (a batch sees the old filter or the new): first its chunks
-- (inbox_ledger_filter_chunks, as many calls as it takes), then
-- inbox_ledger_filter_publish, which drops the chunks of an older, larger
-- filter and checks that every chunk is there.
CREATE FUNCTION inbox_ledger_filter_chunks(day date, first integer, bits bytea[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM unnest(bits) AS b WHERE length(b) IS DISTINCT FROM 3968) THEN
        RAISE EXCEPTION 'a ledger filter chunk is 3968 bytes';
    END IF;
    INSERT INTO inbox_ledger_filter_chunk AS c (event_day, chunk, bits)
    SELECT day, first + (b.ord - 1)::integer, b.bits
    FROM unnest(bits) WITH ORDINALITY AS b(bits, ord)
    ON CONFLICT (event_day, chunk) DO UPDATE SET bits = EXCLUDED.bits;
END;
$$;
CREATE FUNCTION inbox_ledger_filter_publish(day date, built_writes bigint, ids bigint,
                                            chunks integer)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp
AS $$
BEGIN
    DELETE FROM inbox_ledger_filter_chunk c WHERE c.event_day = day AND c.chunk >= chunks;
    IF (SELECT count(*) FROM inbox_ledger_filter_chunk c
        WHERE c.event_day = day AND c.chunk BETWEEN 0 AND chunks - 1) <> chunks THEN
        RAISE EXCEPTION 'the filter of % misses chunks', day;
    END IF;
    UPDATE inbox_ledger_filter f
    SET built_writes = inbox_ledger_filter_publish.built_writes,
        ids = inbox_ledger_filter_publish.ids,
        chunks = inbox_ledger_filter_publish.chunks, built_at = now()
    WHERE f.event_day = day;
END;
$$;
REVOKE EXECUTE ON FUNCTION inbox_ledger_filter_chunks(date, integer, bytea[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION inbox_ledger_filter_publish(date, bigint, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_ledger_filter_chunks(date, integer, bytea[]) TO inventory_app;
GRANT EXECUTE ON FUNCTION inbox_ledger_filter_publish(date, bigint, bigint, integer)
    TO inventory_app;

-- Creates the daily partitions of [first_day, last_day] that are missing
-- (as before), and the ledger filter's row of each ledger day, in the same
-- transaction: no row can be written into a day before its filter row is.
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
                IF parent = 'processed_inbox' THEN
                    INSERT INTO inbox_ledger_filter (event_day) VALUES (day)
                    ON CONFLICT (event_day) DO NOTHING;
                END IF;
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

-- Drops the days older than the retention (as before); a ledger day's
-- filter goes with it.
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
        DELETE FROM inbox_ledger_filter f WHERE f.event_day = day;
        dropped := dropped + 1;
    END LOOP;
    -- Rows of days whose partition is gone otherwise.
    DELETE FROM inbox_ledger_filter f
    WHERE f.event_day < inbox_today() - settings.retention_days
      AND f.event_day NOT IN (SELECT d FROM inbox_window_days() AS d);
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

-- The days there are already (the trigger above counts their late writes
-- from now on; a filter is built from a snapshot taken later).
INSERT INTO inbox_ledger_filter (event_day)
SELECT d FROM inbox_window_days() AS d
ON CONFLICT (event_day) DO NOTHING;

GRANT SELECT ON inbox_ledger_filter, inbox_ledger_filter_chunk TO inventory_app;
