-- The reservations' closed days filtered as the ledger's are
-- (docs/design.md#the-filter-of-closed-days): a batch looked each fresh
-- order up on every closed day of order_reservation in the window, three
-- to four index pages a day, all of them a random page of a day's index
-- once the window outgrows memory. Now a closed day's filter holds the
-- day's order ids beside its message ids (an order id hashed with
-- hashtextextended, seeds 0 and 1, a message id with uuid_hash_extended:
-- one set of bits, two kinds of key), and the batch looks an order up on a
-- closed day only when that day's filter may hold it.
--
-- Exact as the ledger's: every reservation row written into a day once it
-- is over by the clock counts in the day's late_writes (the trigger
-- below), so a filter is used only while it holds every row of its day.
-- A filter built before this migration holds no order id (`orders` null):
-- the ledger still uses it, the reservations of its day are looked up in
-- full until maintenance builds it again (it does so first).

-- Order ids in the day's filter; null: built without them.
ALTER TABLE inbox_ledger_filter ADD COLUMN orders bigint;

-- Counts the reservation rows a statement wrote into days over by the
-- clock at its end, as inbox_ledger_late_write counts the ledger's (a row
-- written uncounted was written by a transaction given its id before its
-- day was over: the build waits for it).
CREATE FUNCTION inbox_reservation_late_write()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp
AS $$
DECLARE
    today date := inbox_clock_day();
BEGIN
    UPDATE inbox_ledger_filter f SET late_writes = f.late_writes + late.rows
    FROM (SELECT reserved_day, count(*) AS rows FROM written
          WHERE reserved_day < today GROUP BY reserved_day) AS late
    WHERE f.event_day = late.reserved_day;
    RETURN NULL;
END;
$$;
REVOKE EXECUTE ON FUNCTION inbox_reservation_late_write() FROM PUBLIC;
CREATE TRIGGER inbox_reservation_late_write
AFTER INSERT ON order_reservation
REFERENCING NEW TABLE AS written
FOR EACH STATEMENT
EXECUTE FUNCTION inbox_reservation_late_write();

-- Publishes a day's filter (as before), with the order ids it holds.
DROP FUNCTION inbox_ledger_filter_publish(date, bigint, bigint, bigint);
CREATE FUNCTION inbox_ledger_filter_publish(day date, built_writes bigint, ids bigint,
                                            orders bigint, words bigint)
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
        orders = inbox_ledger_filter_publish.orders,
        chunks = chunk_count,
        words = inbox_ledger_filter_publish.words,
        built_at = clock_timestamp()
    WHERE f.event_day = day;
END;
$$;
REVOKE EXECUTE ON FUNCTION inbox_ledger_filter_publish(date, bigint, bigint, bigint, bigint)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_ledger_filter_publish(date, bigint, bigint, bigint, bigint)
    TO inventory_app;

-- How each closed day of the window from `from_day` on is looked up for
-- the reservations: 'filter' (its filter is clean, was built with the
-- day's order ids, and the slots lay out that very build), 'none' (its
-- clean filter holds no key at all: the day held no row), else 'full' (no
-- filter row, a late write since the build, or a build without order ids).
-- The days are the window's by the calendar, not the partitions': a day
-- without a partition of reservations is pruned by the look-up itself.
-- PL/pgSQL, so that its plan is made once per connection: the catalog's
-- list of partitions and a SQL function's plan made at every call cost
-- 0.8 ms a batch.
CREATE FUNCTION inbox_reservation_closed_days(from_day date)
RETURNS TABLE (reserved_day date, word_offset integer, width integer, lookup text)
LANGUAGE plpgsql STABLE
SET search_path = public, pg_temp
AS $$
DECLARE
    today date := inbox_today();
BEGIN
    RETURN QUERY
    SELECT g.day::date, l.word_offset, l.width,
           CASE WHEN f.orders IS NULL OR f.built_writes IS DISTINCT FROM f.late_writes
                    THEN 'full'
                WHEN f.ids = 0 THEN 'none'
                WHEN l.built_at = f.built_at THEN 'filter'
                ELSE 'full' END
    FROM generate_series(greatest(from_day,
                                  today - (SELECT s.retention_days FROM inbox_settings s)),
                         today - 1, interval '1 day') AS g(day)
    LEFT JOIN inbox_ledger_filter f ON f.event_day = g.day::date
    LEFT JOIN (SELECT u.* FROM inbox_ledger_filter_layout AS layout,
                      unnest(layout.days, layout.built_at, layout.offsets, layout.widths)
                      AS u(event_day, built_at, word_offset, width)) AS l
           ON l.event_day = g.day::date
    ORDER BY g.day;
END;
$$;
GRANT EXECUTE ON FUNCTION inbox_reservation_closed_days(date) TO inventory_app;

-- The (order, SKU) lines reserved from `from_day` on of the given orders.
-- While the window holds few closed days with a filter of order ids (at
-- most 4), every day is looked up in full: a closed day in memory costs
-- about 0.1 ms a batch of 100 orders, the filter's look-up about 0.4 ms
-- whatever the days (100 slot rows; `pgbench`-like loops on the
-- 10-million-event history, docs/benchmarks/2026-12-07.md). With more:
-- today and the days made ahead, and the closed days not filtered, in
-- full; a filtered closed day only for the orders its filter may hold
-- (at 121 million events a day a closed day's order index is gigabytes,
-- and each probe of it a random read). Exact either way.
-- STABLE: it reads with the calling statement's snapshot.
CREATE FUNCTION inbox_reservations_seen(orders text[], from_day date)
RETURNS TABLE (order_id text, sku text)
LANGUAGE plpgsql STABLE
ROWS 10
SET search_path = public, pg_temp
-- Planned once per connection (as inbox_ledger_seen): the days are pruned
-- as each look-up starts, from its arguments.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    today date := inbox_today();
    full_days date[];
    filtered date[];
    word_offsets integer[];
    widths integer[];
    layout inbox_ledger_filter_layout;
    hit_orders text[];
    hit_days date[];
    first_hit date;
    last_hit date;
BEGIN
    IF (SELECT count(*) FROM inbox_ledger_filter f
        WHERE f.event_day >= from_day AND f.event_day < today
          AND f.orders > 0) <= 4 THEN
        RETURN QUERY
        SELECT o.order_id, o.sku
        FROM order_reservation o
        WHERE o.order_id = ANY (orders)
          AND o.reserved_day >= from_day;
        RETURN;
    END IF;

    SELECT array_agg(c.reserved_day ORDER BY c.reserved_day) FILTER (WHERE c.lookup = 'full'),
           array_agg(c.reserved_day ORDER BY c.reserved_day) FILTER (WHERE c.lookup = 'filter'),
           array_agg(c.word_offset ORDER BY c.reserved_day) FILTER (WHERE c.lookup = 'filter'),
           array_agg(c.width ORDER BY c.reserved_day) FILTER (WHERE c.lookup = 'filter')
    INTO full_days, filtered, word_offsets, widths
    FROM inbox_reservation_closed_days(from_day) AS c;

    RETURN QUERY
    SELECT o.order_id, o.sku
    FROM order_reservation o
    WHERE o.order_id = ANY (orders)
      AND o.reserved_day >= greatest(today, from_day);

    IF full_days IS NOT NULL THEN
        RETURN QUERY
        SELECT o.order_id, o.sku
        FROM order_reservation o
        WHERE o.order_id = ANY (orders)
          AND o.reserved_day = ANY (full_days)
          -- What the partitions are pruned by (not by `= ANY`).
          AND o.reserved_day BETWEEN full_days[1] AND today - 1;
    END IF;

    IF filtered IS NULL THEN
        RETURN;
    END IF;
    -- The orders a filtered day may hold, with that day: each order hashed
    -- once, its slot row read once (the slots in one index scan), one
    -- 64-bit word a day tested.
    SELECT * INTO layout FROM inbox_ledger_filter_layout;
    WITH i AS MATERIALIZED (
        SELECT i.id, i.h % layout.slots AS slot, i.h / layout.slots AS rest,
               inbox_filter_mask(hashtextextended(i.id, 1)) AS mask
        FROM (SELECT id, hashtextextended(id, 0) & 2147483647 AS h
              FROM unnest(orders) AS id) AS i
    )
    SELECT array_agg(i.id), array_agg(d.reserved_day), min(d.reserved_day),
           max(d.reserved_day)
    INTO hit_orders, hit_days, first_hit, last_hit
    FROM i
    JOIN inbox_ledger_filter_slot s
      ON s.generation = layout.generation AND s.slot = i.slot
    CROSS JOIN unnest(filtered, word_offsets, widths) AS d(reserved_day, word_offset, width)
    WHERE s.slot = ANY (ARRAY(SELECT i.slot FROM i)::integer[])
      AND s.words[d.word_offset + (i.rest % d.width)::integer + 1] & i.mask = i.mask;
    IF hit_orders IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT o.order_id, o.sku
    FROM unnest(hit_orders, hit_days) AS h(order_id, reserved_day)
    JOIN order_reservation o ON o.order_id = h.order_id AND o.reserved_day = h.reserved_day
    WHERE o.reserved_day BETWEEN first_hit AND last_hit;
END;
$$;
REVOKE EXECUTE ON FUNCTION inbox_reservations_seen(text[], date) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_reservations_seen(text[], date) TO inventory_app;

-- Whether the filter of a closed day of order_reservation, as laid out
-- now, may hold an order: null when the day is not looked up through it.
-- For tests and for a person asking; the batch does the same arithmetic
-- in inbox_reservations_seen.
CREATE FUNCTION inbox_reservation_filter_may_hold(day date, order_id text)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = public, pg_temp
AS $$
    SELECT s.words[d.word_offset + ((h.h / l.slots) % d.width)::integer + 1] & h.mask = h.mask
    FROM inbox_reservation_closed_days('-infinity') AS d
    CROSS JOIN inbox_ledger_filter_layout l
    CROSS JOIN LATERAL (SELECT hashtextextended(order_id, 0) & 2147483647 AS h,
                               inbox_filter_mask(hashtextextended(order_id, 1)) AS mask) AS h
    JOIN inbox_ledger_filter_slot s ON s.generation = l.generation AND s.slot = h.h % l.slots
    WHERE d.reserved_day = day AND d.lookup = 'filter'
$$;
GRANT EXECUTE ON FUNCTION inbox_reservation_filter_may_hold(date, text) TO inventory_app;
