-- Records the batch in the idempotency ledger. The primary key
-- (event_day, consumer, message_id) decides what is fresh: RETURNING gives
-- exactly the ids inserted now; every other row of the batch is a duplicate
-- of an event already applied and has no effect. One statement per batch.
INSERT INTO processed_inbox (event_day, consumer, message_id, event_type, aggregate_id,
                             topic, kafka_partition, kafka_offset, status, payload_hash,
                             processed_at)
SELECT e.event_day, $1, e.message_id, 'OrderPlaced', e.aggregate_id,
       e.topic, e.kafka_partition, e.kafka_offset, e.status, e.payload_hash,
       clock_timestamp()
FROM UNNEST($2::date[], $3::uuid[], $4::text[], $5::text[], $6::int[], $7::bigint[],
            $8::text[], $9::bigint[])
     AS e(event_day, message_id, aggregate_id, topic, kafka_partition, kafka_offset,
          status, payload_hash)
ON CONFLICT DO NOTHING
RETURNING message_id
