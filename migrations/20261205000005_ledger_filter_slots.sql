-- The filters of the closed days, looked up once an id whatever the number
-- of days (docs/design.md#the-filter-of-closed-days). Until now a batch
-- looked each id up in each closed day's filter: an index probe and a page
-- a day, 13 of them an id at the 14-day window, about a third of the batch
-- statement's time. Now the filters of every closed day are laid side by
-- side in one table of slots: an id's slot row holds the one word of each
-- day's filter that may hold it, so a batch reads one row an id and tests
-- one 64-bit word a day.
--
-- A day's filter is now a register-blocked Bloom filter: T 64-bit words (T
-- a power of two, at least 10 bits an id), the id's word is h mod T (h the
-- low 31 bits of uuid_hash_extended(id, 0)), and its 7 bits in the word are
-- bits 6i..6i+5 of uuid_hash_extended(id, 1) for i in 0..6. The days'
-- filters are stored as before (inbox_ledger_filter_chunk, 496 words to a
-- chunk, little-endian) and laid out from there into
-- inbox_ledger_filter_slot: with S slots (a power of two, at most the
-- smallest day's T, see src/store/filter.rs), slot s holds of each day
-- the words s, s + S, s + 2S, ... (T/S of them), or, for a day smaller than
-- S, its word s mod T (the day repeated: it holds what it held). An id's
-- slot is h mod S and its word of a day the ((h / S) mod width)-th of the
-- day's in the row.
--
-- Exact as before: a day is looked up through the slots only while its
-- filter is clean and the layout holds the build that is clean (built_at),
-- otherwise in full.

-- The filters built in the old format are built again by maintenance; a
-- day is looked up in full until then.
DELETE FROM inbox_ledger_filter_chunk;
UPDATE inbox_ledger_filter SET built_writes = NULL, ids = NULL, chunks = NULL, built_at = NULL;
DROP FUNCTION inbox_filter_may_hold(bytea, bigint, bigint);
DROP FUNCTION inbox_ledger_filter_publish(date, bigint, bigint, integer);
DROP FUNCTION inbox_ledger_filter_chunks(date, integer, bytea[]);

-- The words of the day's filter (T; 0 when the day held no id).
ALTER TABLE inbox_ledger_filter ADD COLUMN words bigint;

-- A day's filter in chunks of up to 496 words (3,968 bytes, two rows to a
-- page); only the last chunk may be shorter.
CREATE FUNCTION inbox_ledger_filter_chunks(day date, first integer, bits bytea[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM unnest(bits) AS b
               WHERE b IS NULL OR length(b) NOT BETWEEN 8 AND 3968 OR length(b) % 8 <> 0) THEN
        RAISE EXCEPTION 'a ledger filter chunk is 1 to 496 words of 8 bytes';
    END IF;
    INSERT INTO inbox_ledger_filter_chunk AS c (event_day, chunk, bits)
    SELECT day, first + (b.ord - 1)::integer, b.bits
    FROM unnest(bits) WITH ORDINALITY AS b(bits, ord)
    ON CONFLICT (event_day, chunk) DO UPDATE SET bits = EXCLUDED.bits;
END;
$$;

-- Publishes a day's filter once its chunks are written, in the same
-- transaction; drops the chunks of an older, larger one and checks that
-- the chunks hold every word.
CREATE FUNCTION inbox_ledger_filter_publish(day date, built_writes bigint, ids bigint,
                                            words bigint)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp
AS $$
DECLARE
    chunk_count integer := ((words + 495) / 496)::integer;
BEGIN
    DELETE FROM inbox_ledger_filter_chunk c WHERE c.event_day = day AND c.chunk >= chunk_count;
    IF (SELECT coalesce(sum(length(c.bits)), 0) FROM inbox_ledger_filter_chunk c
        WHERE c.event_day = day AND c.chunk BETWEEN 0 AND chunk_count - 1) <> words * 8 THEN
        RAISE EXCEPTION 'the filter of % misses words', day;
    END IF;
    UPDATE inbox_ledger_filter f
    SET built_writes = inbox_ledger_filter_publish.built_writes,
        ids = inbox_ledger_filter_publish.ids,
        chunks = chunk_count,
        words = inbox_ledger_filter_publish.words,
        built_at = clock_timestamp()
    WHERE f.event_day = day;
END;
$$;

-- The slots of the layout being written (generation) and of the one in use.
CREATE TABLE inbox_ledger_filter_slot (
    generation integer  NOT NULL,
    slot       integer  NOT NULL,
    words      bigint[] NOT NULL,
    PRIMARY KEY (generation, slot)
);
-- In line, uncompressed (random bits do not compress): a row is a few
-- words a day.
ALTER TABLE inbox_ledger_filter_slot ALTER COLUMN words SET STORAGE MAIN;

-- The layout in use: one row, or none before the first.
CREATE TABLE inbox_ledger_filter_layout (
    one        boolean       PRIMARY KEY DEFAULT true CHECK (one),
    generation integer       NOT NULL,
    -- S, a power of two.
    slots      bigint        NOT NULL,
    -- The days laid out, each with the build it holds (inbox_ledger_filter's
    -- built_at), the words before its own in a row, and its words in a row.
    days       date[]        NOT NULL,
    built_at   timestamptz[] NOT NULL,
    offsets    integer[]     NOT NULL,
    widths     integer[]     NOT NULL
);

-- Writes slot rows [first, first + n) of a layout being written: `words`
-- holds n rows of `row_words` words, one after the other.
CREATE FUNCTION inbox_ledger_filter_slots(generation integer, first integer, row_words integer,
                                          words bigint[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp
AS $$
BEGIN
    IF row_words < 1 OR cardinality(inbox_ledger_filter_slots.words) % row_words <> 0 THEN
        RAISE EXCEPTION 'slot rows of % words from % words',
            row_words, cardinality(inbox_ledger_filter_slots.words);
    END IF;
    INSERT INTO inbox_ledger_filter_slot AS s (generation, slot, words)
    SELECT inbox_ledger_filter_slots.generation, first + n,
           inbox_ledger_filter_slots.words[n * row_words + 1 : (n + 1) * row_words]
    FROM generate_series(0, cardinality(inbox_ledger_filter_slots.words) / row_words - 1) AS n
    ON CONFLICT ON CONSTRAINT inbox_ledger_filter_slot_pkey
    DO UPDATE SET words = EXCLUDED.words;
END;
$$;

-- Puts a layout written by inbox_ledger_filter_slots in use, in the
-- transaction that wrote it, and deletes the slots of every other (a batch
-- that began before still reads the old in its snapshot). Checks that each
-- slot row is there and of the layout's width.
CREATE FUNCTION inbox_ledger_filter_layout_publish(generation integer, slots bigint,
                                                   days date[], built_at timestamptz[],
                                                   offsets integer[], widths integer[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp
AS $$
DECLARE
    row_words integer := coalesce((SELECT sum(w) FROM unnest(widths) AS w), 0);
BEGIN
    IF cardinality(days) > 0 AND (SELECT count(*) FROM inbox_ledger_filter_slot s
        WHERE s.generation = inbox_ledger_filter_layout_publish.generation
          AND s.slot BETWEEN 0 AND slots - 1 AND cardinality(s.words) = row_words) <> slots THEN
        RAISE EXCEPTION 'the layout % misses slots', generation;
    END IF;
    INSERT INTO inbox_ledger_filter_layout AS l
           (one, generation, slots, days, built_at, offsets, widths)
    VALUES (true, generation, slots, days, built_at, offsets, widths)
    ON CONFLICT (one) DO UPDATE
    SET generation = EXCLUDED.generation, slots = EXCLUDED.slots, days = EXCLUDED.days,
        built_at = EXCLUDED.built_at, offsets = EXCLUDED.offsets, widths = EXCLUDED.widths;
    DELETE FROM inbox_ledger_filter_slot s
    WHERE s.generation <> inbox_ledger_filter_layout_publish.generation;
END;
$$;

-- The 7 bits an id sets in its word, from its second hash.
CREATE FUNCTION inbox_filter_mask(h2 bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (1::bigint << (h2 & 63)::integer) | (1::bigint << ((h2 >> 6) & 63)::integer)
     | (1::bigint << ((h2 >> 12) & 63)::integer) | (1::bigint << ((h2 >> 18) & 63)::integer)
     | (1::bigint << ((h2 >> 24) & 63)::integer) | (1::bigint << ((h2 >> 30) & 63)::integer)
     | (1::bigint << ((h2 >> 36) & 63)::integer);

-- Whether the filter of a day, as laid out now, may hold an id: null when
-- the day is not laid out, or its filter is not clean. The batch statement
-- does the same arithmetic in line (sql/apply_batch.sql); this one is for
-- tests and for a person asking.
CREATE FUNCTION inbox_ledger_filter_may_hold(day date, id uuid)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT s.words[d.word_offset + ((h.h / l.slots) % d.width)::integer + 1] & h.mask = h.mask
    FROM inbox_ledger_filter_layout l
    CROSS JOIN LATERAL unnest(l.days, l.built_at, l.offsets, l.widths)
                       AS d(event_day, built_at, word_offset, width)
    JOIN inbox_ledger_filter f
      ON f.event_day = d.event_day AND f.built_at = d.built_at AND f.built_writes = f.late_writes
    CROSS JOIN LATERAL (SELECT uuid_hash_extended(id, 0) & 2147483647 AS h,
                               inbox_filter_mask(uuid_hash_extended(id, 1)) AS mask) AS h
    JOIN inbox_ledger_filter_slot s ON s.generation = l.generation AND s.slot = h.h % l.slots
    WHERE d.event_day = day
$$;

REVOKE EXECUTE ON FUNCTION inbox_ledger_filter_chunks(date, integer, bytea[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION inbox_ledger_filter_publish(date, bigint, bigint, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION inbox_ledger_filter_slots(integer, integer, integer, bigint[])
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION inbox_ledger_filter_layout_publish(integer, bigint, date[],
                                                              timestamptz[], integer[], integer[])
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_ledger_filter_chunks(date, integer, bytea[]) TO inventory_app;
GRANT EXECUTE ON FUNCTION inbox_ledger_filter_publish(date, bigint, bigint, bigint)
    TO inventory_app;
GRANT EXECUTE ON FUNCTION inbox_ledger_filter_slots(integer, integer, integer, bigint[])
    TO inventory_app;
GRANT EXECUTE ON FUNCTION inbox_ledger_filter_layout_publish(integer, bigint, date[],
                                                             timestamptz[], integer[], integer[])
    TO inventory_app;
GRANT SELECT ON inbox_ledger_filter_slot, inbox_ledger_filter_layout TO inventory_app;
