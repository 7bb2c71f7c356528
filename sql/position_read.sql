-- The database's positions of a consumer's partitions: $1 consumer, $2
-- topics, $3 partition numbers (the caller keeps only the pairs it asked
-- for). topic_id tells a topic deleted and created again under its name.
-- applied_through: the highest position a batch wrote, which an operator's
-- set does not move back.
SELECT topic, kafka_partition, next_offset, topic_id, moved_by_operator, applied_through
FROM inbox_position
WHERE consumer = $1 AND topic = ANY($2::text[]) AND kafka_partition = ANY($3::int[])
