-- `inventory-inbox inspect`: parked rows of some events (by message id), of
-- one record (by its position; the unique key serves it) or of one order
-- (by the record key, which is the order id, SPEC §4; its own index). The
-- payload and headers come along only to read the order a row names.
-- $1: consumer, $2: message ids, $3: topic, $4: partition, $5: offset,
-- $6: order id.
SELECT p.id, p.topic, p.kafka_partition, p.kafka_offset, p.message_id, p.reason, p.error,
       p.parked_at, p.replayed_at, p.replay_outcome, p.payload, p.headers::text AS headers,
       p.record_key
FROM inbox_parked p
WHERE p.consumer = $1
  AND (p.message_id = ANY ($2)
       OR (p.topic = $3 AND p.kafka_partition = $4 AND p.kafka_offset = $5)
       OR p.record_key = convert_to($6, 'UTF8'))
ORDER BY p.parked_at, p.id
