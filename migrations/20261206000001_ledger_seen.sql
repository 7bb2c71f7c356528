-- What the ledger holds of a batch's ids, looked up by a function instead
-- of by the batch statement's own steps (docs/design.md#the-batch-transaction).
--
-- The batch statement's plan is generic (prepared once per connection): it
-- holds every partition of the tables it reads and, at executor start, opens
-- each with its index, for every batch, even those the statement then skips.
-- Its three look-ups of the ledger (the days looked up in full, the days
-- before yesterday without a clean filter, the ids a filter may hold) held
-- the window's days three times, 51 partitions opened and closed per batch
-- (about 0.7 ms, a third of what a batch of one costs). Here each look-up
-- is pruned to the days it reads as it starts, so only those are opened:
-- today's and the days ahead, usually; a closed day only for the ids its
-- filter may hold.
--
-- STABLE: it reads with the statement's snapshot, as the steps it replaces
-- did (the statement's race check, IX003, relies on that).

CREATE FUNCTION inbox_ledger_seen(consumer_code smallint, ids uuid[])
RETURNS TABLE (message_id uuid, payload_hash bigint, topic smallint,
               kafka_partition integer, kafka_offset bigint, event_day date)
LANGUAGE plpgsql STABLE
ROWS 10
SET search_path = public, pg_temp
-- Each look-up planned once per connection: its days are pruned as it
-- starts, from its arguments, which costs less than planning it for each
-- batch's days (0.24 against 0.35 ms a call, pgbench, 10 ids).
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    today date := inbox_today();
    -- The first day looked up in full: yesterday while it is not filtered.
    full_from date;
    -- The days before yesterday that are not filtered, looked up in full.
    stale date[];
    -- The filtered closed days and where their words are in the slots.
    filtered date[];
    word_offsets integer[];
    widths integer[];
    layout inbox_ledger_filter_layout;
    hit_ids uuid[];
    hit_days date[];
    first_hit date;
    last_hit date;
BEGIN
    SELECT CASE WHEN bool_or(c.event_day = today - 1 AND NOT c.filtered)
                THEN today - 1 ELSE today END,
           array_agg(c.event_day ORDER BY c.event_day)
               FILTER (WHERE NOT c.filtered AND c.event_day < today - 1),
           array_agg(c.event_day ORDER BY c.event_day) FILTER (WHERE c.filtered),
           array_agg(c.word_offset ORDER BY c.event_day) FILTER (WHERE c.filtered),
           array_agg(c.width ORDER BY c.event_day) FILTER (WHERE c.filtered)
    INTO full_from, stale, filtered, word_offsets, widths
    FROM inbox_ledger_closed_days() AS c;

    RETURN QUERY
    SELECT p.message_id, p.payload_hash, p.topic, p.kafka_partition, p.kafka_offset,
           p.event_day
    FROM processed_inbox p
    WHERE p.message_id = ANY (ids)
      AND p.consumer = consumer_code
      AND p.event_day >= full_from;

    IF stale IS NOT NULL THEN
        RETURN QUERY
        SELECT p.message_id, p.payload_hash, p.topic, p.kafka_partition, p.kafka_offset,
               p.event_day
        FROM processed_inbox p
        WHERE p.message_id = ANY (ids)
          AND p.consumer = consumer_code
          AND p.event_day = ANY (stale)
          -- What the partitions are pruned by (not by `= ANY`).
          AND p.event_day BETWEEN stale[1] AND today - 2;
    END IF;

    IF filtered IS NULL THEN
        RETURN;
    END IF;
    -- The ids a filtered day may hold, with that day: each id's slot row
    -- read once, one 64-bit word a day.
    SELECT * INTO layout FROM inbox_ledger_filter_layout;
    SELECT array_agg(i.id), array_agg(d.event_day), min(d.event_day), max(d.event_day)
    INTO hit_ids, hit_days, first_hit, last_hit
    FROM (SELECT id, uuid_hash_extended(id, 0) & 2147483647 AS h,
                 inbox_filter_mask(uuid_hash_extended(id, 1)) AS mask
          FROM unnest(ids) AS id) AS i
    JOIN inbox_ledger_filter_slot s
      ON s.generation = layout.generation AND s.slot = i.h % layout.slots
    CROSS JOIN unnest(filtered, word_offsets, widths) AS d(event_day, word_offset, width)
    WHERE s.words[d.word_offset + ((i.h / layout.slots) % d.width)::integer + 1]
          & i.mask = i.mask;
    IF hit_ids IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.message_id, x.payload_hash, x.topic, x.kafka_partition, x.kafka_offset,
           x.event_day
    FROM unnest(hit_ids, hit_days) AS o(message_id, event_day)
    JOIN processed_inbox x ON x.message_id = o.message_id AND x.event_day = o.event_day
    WHERE x.consumer = consumer_code
      AND x.event_day BETWEEN first_hit AND last_hit;
END;
$$;

REVOKE EXECUTE ON FUNCTION inbox_ledger_seen(smallint, uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_ledger_seen(smallint, uuid[]) TO inventory_app;
