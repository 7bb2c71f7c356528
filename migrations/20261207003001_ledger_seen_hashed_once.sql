-- The ledger's look-up of a batch's ids (20261206000001) with each id
-- hashed once: the filters' test of an id on each closed day computed its
-- two hashes and its mask again for every day (`uuid_hash_extended` was
-- the largest single cost of the look-up under `perf`). About 0.07 ms of a
-- batch of 100 on a database holding three days of history (pgbench of the
-- look-up alone, 100 random ids; docs/benchmarks/2026-12-07.md); the same
-- on a database without history, which has no filtered day to test.
--
-- STABLE: it reads with the statement's snapshot; a row a concurrent batch
-- commits since is refused by the ledger's key when the batch writes it.

CREATE OR REPLACE FUNCTION inbox_ledger_seen(consumer_code smallint, ids uuid[])
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
    -- read once, one 64-bit word a day. Each id hashed once (OFFSET 0 keeps
    -- the hashes from being computed again for each day tested).
    SELECT * INTO layout FROM inbox_ledger_filter_layout;
    SELECT array_agg(i.id), array_agg(d.event_day), min(d.event_day), max(d.event_day)
    INTO hit_ids, hit_days, first_hit, last_hit
    FROM (SELECT i.id, i.h % layout.slots AS slot, i.h / layout.slots AS rest,
                 inbox_filter_mask(uuid_hash_extended(i.id, 1)) AS mask
          FROM (SELECT id, uuid_hash_extended(id, 0) & 2147483647 AS h
                FROM unnest(ids) AS id) AS i
          OFFSET 0) AS i
    JOIN inbox_ledger_filter_slot s
      ON s.generation = layout.generation AND s.slot = i.slot
    CROSS JOIN unnest(filtered, word_offsets, widths) AS d(event_day, word_offset, width)
    WHERE s.words[d.word_offset + (i.rest % d.width)::integer + 1] & i.mask = i.mask;
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
