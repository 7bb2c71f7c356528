-- `inventory-inbox inspect`: the ledger rows of some events, with every day
-- of the window searched (the primary key leads with the message id).
-- $1: consumer, $2: the events' message ids.
SELECT l.message_id, l.event_day, t.name AS topic, l.kafka_partition, l.kafka_offset,
       CASE l.status WHEN 'p' THEN 'processed' ELSE 'business_duplicate' END AS status,
       l.aggregate_id AS order_id, l.processed_at
FROM processed_inbox l
JOIN inbox_topic t ON t.code = l.topic
WHERE l.message_id = ANY ($2)
  AND l.consumer = (SELECT code FROM inbox_consumer WHERE name = $1)
ORDER BY l.processed_at, l.message_id
