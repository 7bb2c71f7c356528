-- `inventory-inbox inspect`: parked rows of some events (by message id) or
-- of one record (by its position; the unique key serves it).
-- $1: consumer, $2: message ids, $3: topic, $4: partition, $5: offset.
SELECT p.id, p.topic, p.kafka_partition, p.kafka_offset, p.message_id, p.reason, p.error,
       p.parked_at, p.replayed_at, p.replay_outcome
FROM inbox_parked p
WHERE p.consumer = $1
  AND (p.message_id = ANY ($2)
       OR (p.topic = $3 AND p.kafka_partition = $4 AND p.kafka_offset = $5))
ORDER BY p.parked_at, p.id
