-- The stored payload fingerprints of ids the batch found already in the
-- ledger: equal means a redelivery, different means the producer reused an id
-- for another event. One primary-key probe per id, all in one statement.
SELECT l.message_id, l.payload_hash
FROM UNNEST($2::date[], $3::uuid[]) AS k(event_day, message_id)
JOIN processed_inbox l USING (event_day, message_id)
WHERE l.consumer = $1
