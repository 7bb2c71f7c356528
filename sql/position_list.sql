-- Every position of a consumer ($1), of one topic ($2) or all (NULL).
SELECT topic, kafka_partition, next_offset, updated_at FROM inbox_position
WHERE consumer = $1 AND ($2::text IS NULL OR topic = $2)
ORDER BY topic, kafka_partition
