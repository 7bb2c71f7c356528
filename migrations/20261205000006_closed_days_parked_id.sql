-- Two functions the batch statement reads instead of writing their queries
-- out (docs/design.md#the-batch-transaction).
--
-- inbox_ledger_closed_days: the one definition of a closed day's filter
-- state, which the batch statement, `maintain`'s count of the days looked
-- up in full and inbox_ledger_filter_may_hold each wrote out before.
--
-- inbox_parked_id: the parked row of a position. The batch statement's
-- plan is generic (prepared once per connection), so it holds every
-- partition of the tables it reads, and opens each with its index at
-- executor start for every batch, even where it reads none. Looked up
-- through a function, which runs only for the records a batch parks, the
-- parked rows' partitions (30 days of them by default) leave that plan.

-- The ledger's closed days (yesterday and older) and their filters: where
-- each day's words are in the slots, and whether it is filtered (its filter
-- is clean and the slots hold that very build). A day whose clean filter
-- saw no id is left out: it rules out every id. The one definition of
-- "filtered", read by the batch statement, by `maintain`'s count of the
-- days looked up in full, and by inbox_ledger_filter_may_hold.
CREATE FUNCTION inbox_ledger_closed_days()
RETURNS TABLE (event_day date, word_offset integer, width integer, filtered boolean)
LANGUAGE sql STABLE AS $$
    SELECT d.event_day, l.word_offset, l.width,
           coalesce(f.built_writes = f.late_writes AND l.built_at = f.built_at, false)
    FROM inbox_window_days() AS d(event_day)
    LEFT JOIN inbox_ledger_filter f ON f.event_day = d.event_day
    LEFT JOIN (SELECT u.* FROM inbox_ledger_filter_layout AS layout,
                      unnest(layout.days, layout.built_at, layout.offsets, layout.widths)
                      AS u(event_day, built_at, word_offset, width)) AS l
           ON l.event_day = d.event_day
    WHERE d.event_day < inbox_today()
      AND (f.built_writes IS NULL OR f.built_writes <> f.late_writes OR f.ids > 0)
$$;

-- The parked row of a record's position, whatever its day: asked for only
-- for the records a batch parks, so that the batch statement's plan holds
-- none of inbox_parked's partitions (30 days of them by default).
CREATE FUNCTION inbox_parked_id(p_consumer text, p_topic text, p_partition integer,
                                p_offset bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT min(x.id) FROM inbox_parked x
            WHERE x.consumer = p_consumer AND x.topic = p_topic
              AND x.kafka_partition = p_partition AND x.kafka_offset = p_offset);
END
$$;

CREATE OR REPLACE FUNCTION inbox_ledger_filter_may_hold(day date, id uuid)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT s.words[d.word_offset + ((h.h / l.slots) % d.width)::integer + 1] & h.mask = h.mask
    FROM inbox_ledger_closed_days() d
    CROSS JOIN inbox_ledger_filter_layout l
    CROSS JOIN LATERAL (SELECT uuid_hash_extended(id, 0) & 2147483647 AS h,
                               inbox_filter_mask(uuid_hash_extended(id, 1)) AS mask) AS h
    JOIN inbox_ledger_filter_slot s ON s.generation = l.generation AND s.slot = h.h % l.slots
    WHERE d.event_day = day AND d.filtered
$$;

GRANT EXECUTE ON FUNCTION inbox_ledger_closed_days() TO inventory_app;
GRANT EXECUTE ON FUNCTION inbox_parked_id(text, text, integer, bigint) TO inventory_app;
