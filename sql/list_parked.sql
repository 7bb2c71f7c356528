-- Parked records of a consumer, oldest first, optionally of one reason and
-- since a time. Served by the (reason, parked_at) index when a reason is given.
-- The payload, headers and key give each its order (src/parked.rs).
SELECT id, parked_at, reason, error, topic, kafka_partition, kafka_offset, message_id,
       replayed_at, replay_outcome, trace_id, payload, headers::text AS headers, record_key
FROM inbox_parked
WHERE consumer = $1
  AND ($2::text IS NULL OR reason = $2)
  AND ($3::timestamptz IS NULL OR parked_at >= $3)
ORDER BY id
LIMIT $4
