-- The stored payload fingerprints of ids the batch found already in the
-- ledger: equal means a redelivery, different means the producer reused an id
-- for another event. One primary-key probe per id (LATERAL keeps it a
-- parameterised index lookup in the one partition of that day, whatever the
-- ledger's size), all in one statement.
SELECT k.message_id, l.payload_hash
FROM UNNEST($2::date[], $3::uuid[]) AS k(event_day, message_id)
CROSS JOIN LATERAL (
    SELECT p.payload_hash
    FROM processed_inbox p
    WHERE p.event_day = k.event_day AND p.consumer = $1 AND p.message_id = k.message_id
) AS l
