-- Parked records of a consumer counted by reason ($2: every code) and day
-- (UTC), newest day first: the console's groups. Each count stops at $3
-- (the console says "at least"): a broken producer parks millions, and a
-- page that counted them all would take seconds. One bounded index-only
-- scan of inbox_parked_consumer_idx (consumer, reason, parked_at) per
-- reason and day that has a partition (parked_at's UTC date is the
-- parked_day the row was written to: the partition key comes from the
-- same clock). No condition on parked_day: it is not in the index, and
-- the heap of every row counted would be read for it (1M rows: 3 s
-- instead of 0.1 s); the other days' indexes answer an empty range at
-- once.
SELECT r.reason, d.day, c.records
FROM unnest($2::text[]) AS r(reason)
CROSS JOIN inbox_parked_days() AS d(day)
CROSS JOIN LATERAL (
    SELECT count(*) AS records
    FROM (
        SELECT 1
        FROM inbox_parked p
        WHERE p.consumer = $1
          AND p.reason = r.reason
          AND p.parked_at >= (d.day::timestamp AT TIME ZONE 'UTC')
          AND p.parked_at < ((d.day + 1)::timestamp AT TIME ZONE 'UTC')
        LIMIT $3
    ) AS counted
) AS c
WHERE c.records > 0
ORDER BY d.day DESC, r.reason
