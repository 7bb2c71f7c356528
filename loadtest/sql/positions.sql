-- The consumer's next offset of each partition of the topic it reads.
SELECT kafka_partition, next_offset
FROM inbox_position
WHERE consumer = $1 AND topic = $2
