-- Parked records of a consumer, oldest first (by id), filtered: $2 reason,
-- $3 parked since, $4 parked on that day (UTC; one partition), $5 order
-- (the record key, which is the order id, SPEC §4; its own index), $6 a
-- SKU (named by the payload or the error: a text match, not a parse), $7
-- partition, $8 only ids after this one (keyset paging: the console's next
-- page starts after the last id it showed, never with OFFSET). NULL: no
-- such filter. $9: at most this many. The payload, headers and key give
-- each its order (src/parked.rs). Shared by `parked list` and the console.
SELECT id, parked_at, reason, error, topic, kafka_partition, kafka_offset, message_id,
       replayed_at, replay_outcome, trace_id, payload, headers::text AS headers, record_key
FROM inbox_parked
WHERE consumer = $1
  AND ($2::text IS NULL OR reason = $2)
  AND ($3::timestamptz IS NULL OR parked_at >= $3)
  AND ($4::date IS NULL OR parked_day = $4)
  AND ($5::text IS NULL OR record_key = convert_to($5, 'UTF8'))
  AND ($6::text IS NULL OR strpos(error, $6) > 0
       OR position(convert_to($6, 'UTF8') IN payload) > 0)
  AND ($7::int IS NULL OR kafka_partition = $7)
  AND ($8::bigint IS NULL OR id > $8)
ORDER BY id
LIMIT $9
