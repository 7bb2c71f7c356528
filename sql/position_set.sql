-- The only statement that moves a position backwards: an operator's
-- deliberate re-read or skip (`inventory-inbox positions set`). $1
-- consumer, $2 topic, $3 partition, $4 next offset. Returns the position
-- before (NULL when there was none).
WITH before AS (
    SELECT next_offset FROM inbox_position
    WHERE consumer = $1 AND topic = $2 AND kafka_partition = $3
    FOR UPDATE
), upsert AS (
    INSERT INTO inbox_position AS p (consumer, topic, kafka_partition, next_offset,
                                     moved_by_operator)
    VALUES ($1, $2, $3, $4, true)
    ON CONFLICT (consumer, topic, kafka_partition) DO UPDATE
        SET next_offset = EXCLUDED.next_offset, moved_by_operator = true,
            updated_at = now()
)
SELECT (SELECT next_offset FROM before)
