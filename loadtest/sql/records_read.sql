-- Records of one topic the consumer has taken: its positions (the next
-- offset of each partition) added up. The drain wait reads this instead of
-- counting the ledger while the consumer is still at work.
-- $1: consumer, $2: topic.
SELECT coalesce(sum(next_offset), 0)::bigint AS records_read
FROM inbox_position
WHERE consumer = $1 AND topic = $2
