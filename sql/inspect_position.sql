-- `inventory-inbox inspect`: the consumer's position in a partition (the
-- next offset it reads).
-- $1: consumer, $2: topic, $3: partition.
SELECT next_offset FROM inbox_position
WHERE consumer = $1 AND topic = $2 AND kafka_partition = $3
