-- Events per minute by the outcome the database records, over the last
-- hour: the console's chart. `processed` and `business_duplicate` from the
-- ledger, `parked` from inbox_parked; a duplicate leaves no row (it is
-- counted only in inbox_duplicate_ignored_total). The ledger is read on the
-- event days of today and yesterday only (partition pruning: the last
-- hour's events are nearly all of those days; a late event of an older day
-- is left out of the chart) and those partitions are scanned: processed_at
-- has no index (one on the hot path would cost every batch). Parked rows
-- by inbox_parked_consumer_idx (consumer, reason, parked_at), one range a
-- reason ($2: every code).
-- $1: consumer.
SELECT date_trunc('minute', l.processed_at) AS minute,
       CASE l.status WHEN 'p' THEN 'processed' ELSE 'business_duplicate' END AS outcome,
       count(*) AS events
FROM processed_inbox l
WHERE l.consumer = (SELECT code FROM inbox_consumer WHERE name = $1)
  AND l.event_day >= current_date - 1
  AND l.processed_at >= now() - interval '1 hour'
GROUP BY 1, 2
UNION ALL
SELECT date_trunc('minute', parked_at), 'parked', count(*)
FROM inbox_parked
WHERE consumer = $1
  AND reason = ANY ($2::text[])
  AND parked_day >= current_date - 1
  AND parked_at >= now() - interval '1 hour'
GROUP BY 1
ORDER BY 1, 2
