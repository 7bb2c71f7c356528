-- Parks the batch's records that cannot be applied, in the same transaction
-- as the rest of the batch. Unique on (consumer, topic, partition, offset), so
-- a redelivered record is parked once; RETURNING gives the rows parked now,
-- which are then copied to the DLQ topic. One statement per batch.
INSERT INTO inbox_parked (consumer, topic, kafka_partition, kafka_offset, message_id,
                          reason, error, payload, headers)
SELECT $1, p.topic, p.kafka_partition, p.kafka_offset, p.message_id,
       p.reason, p.error, p.payload, p.headers::jsonb
FROM UNNEST($2::text[], $3::int[], $4::bigint[], $5::uuid[], $6::text[], $7::text[],
            $8::bytea[], $9::text[])
     AS p(topic, kafka_partition, kafka_offset, message_id, reason, error, payload, headers)
ON CONFLICT DO NOTHING
RETURNING topic, kafka_partition, kafka_offset
