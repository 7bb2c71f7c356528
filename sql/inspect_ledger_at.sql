-- `inventory-inbox inspect --offset` of a record the topic no longer holds
-- (retention deleted it): the ids of the ledger rows written from that
-- position, on every day of the window. The BRIN index on kafka_offset
-- serves it (migrations/20261206000003_inspect_by_position_and_key.sql):
-- each day reads its range summaries and then only the ranges whose offsets
-- pass this one; the caller turns sequential scans off for the look-up, so
-- that no estimate ever reads a day's heap whole instead.
-- $1: consumer, $2: topic, $3: partition, $4: offset.
SELECT l.message_id
FROM processed_inbox l
WHERE l.kafka_offset = $4
  AND l.kafka_partition = $3
  AND l.topic = (SELECT code FROM inbox_topic WHERE name = $2)
  AND l.consumer = (SELECT code FROM inbox_consumer WHERE name = $1)
ORDER BY l.message_id
