-- Records the batch in the idempotency ledger. The primary key
-- (event_day, consumer, message_id) decides what is fresh, in one statement
-- per batch:
--   returned with the batch's fingerprint   a fresh event, to apply now;
--   not returned                            a duplicate of an event already
--                                           applied (same fingerprint);
--   returned with another fingerprint       a known id whose stored payload
--                                           differs: the producer reused the
--                                           id for another event (a conflict).
-- The no-op update only makes a conflicting row visible to RETURNING; it
-- rewrites the stored value unchanged.
INSERT INTO processed_inbox AS l (event_day, consumer, message_id, event_type, aggregate_id,
                                  topic, kafka_partition, kafka_offset, status, payload_hash,
                                  processed_at)
SELECT e.event_day, $1, e.message_id, 'OrderPlaced', e.aggregate_id,
       e.topic, e.kafka_partition, e.kafka_offset, e.status, e.payload_hash,
       clock_timestamp()
FROM UNNEST($2::date[], $3::uuid[], $4::text[], $5::text[], $6::int[], $7::bigint[],
            $8::text[], $9::bigint[])
     AS e(event_day, message_id, aggregate_id, topic, kafka_partition, kafka_offset,
          status, payload_hash)
ON CONFLICT (event_day, consumer, message_id) DO UPDATE
    SET payload_hash = l.payload_hash
    WHERE l.payload_hash <> EXCLUDED.payload_hash
RETURNING l.message_id, l.payload_hash
