-- The ledger rows of a run's own events (at most one each: the primary
-- key), with the instant each was applied, the end of its end-to-end
-- latency. Bounded by event_day to the run's partitions.
-- $1: consumer, $2 and $3: the first and last event day, $4: message ids.
SELECT message_id, processed_at
FROM processed_inbox
WHERE consumer = (SELECT code FROM inbox_consumer WHERE name = $1) AND event_day BETWEEN $2 AND $3
  AND message_id = ANY($4)
