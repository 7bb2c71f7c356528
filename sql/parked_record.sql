-- One parked record of a consumer, whole: the console's record page
-- (payload, headers, error, its DLQ copy and every replay). By id: the
-- primary key (id, parked_day) serves it in every partition.
SELECT id, parked_day, parked_at, reason, error, topic, kafka_partition, kafka_offset,
       message_id, replayed_at, replay_outcome, trace_id, payload, headers::text AS headers,
       record_key, dlq_sent_at, replays::text AS replays
FROM inbox_parked
WHERE consumer = $1 AND id = $2
