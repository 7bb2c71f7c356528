-- Takes one parked record for replay. The row lock serialises concurrent
-- replays of the same record: the second one sees replayed_at set and does
-- nothing (the ledger would refuse a second application anyway).
SELECT topic, kafka_partition, kafka_offset, payload, headers::text AS headers, replayed_at
FROM inbox_parked
WHERE id = $1 AND consumer = $2
FOR UPDATE
