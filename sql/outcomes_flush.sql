-- A member's counts of outcomes per minute added to the ring
-- (migrations/20261207000001): a minute already in its slot adds up, a
-- newer minute takes the slot over, an older one (a flush delayed past
-- two hours) is dropped. $1 consumer; $2, $3, $4 the minutes, their
-- outcomes and counts, one entry per (minute, outcome).
INSERT INTO inbox_outcome_minute AS o (consumer, slot, outcome, minute, events)
SELECT $1, (floor(extract(epoch FROM c.minute) / 60)::bigint % 120)::smallint, c.outcome,
       c.minute, c.events
FROM unnest($2::timestamptz[], $3::text[], $4::bigint[]) AS c(minute, outcome, events)
ON CONFLICT (consumer, slot, outcome) DO UPDATE
    SET events = CASE WHEN o.minute = EXCLUDED.minute THEN o.events + EXCLUDED.events
                      ELSE EXCLUDED.events END,
        minute = EXCLUDED.minute
    WHERE o.minute <= EXCLUDED.minute
