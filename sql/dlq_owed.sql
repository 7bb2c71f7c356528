-- The parked rows of these partitions whose DLQ copy is still owed (not
-- sent, and not on its way now: $4), oldest first, at most $5: what the
-- consumer owning the partitions sends (docs/design.md#outcomes).
SELECT p.id, p.topic, p.kafka_partition, p.kafka_offset, p.message_id, p.reason, p.error,
       p.payload, p.headers::text AS headers, p.trace_id, p.record_key
FROM inbox_parked p
JOIN UNNEST($2::text[], $3::int[]) AS o(topic, kafka_partition)
  ON o.topic = p.topic AND o.kafka_partition = p.kafka_partition
WHERE p.consumer = $1
  AND p.dlq_sent_at IS NULL
  AND p.id <> ALL ($4::bigint[])
ORDER BY p.id
LIMIT $5
