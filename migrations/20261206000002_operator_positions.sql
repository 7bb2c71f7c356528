-- An operator's `positions set` is honoured while consumers run, in both
-- directions (docs/operations.md#moving-a-position):
-- - a batch whose partition's position an operator set since the consumer
--   last wrote or read it is refused whole (SQLSTATE IX001, as a database
--   gone back), also when the set commits while the batch waits on a lock:
--   the batch statement checks the newest version of the position row as it
--   writes it (sql/apply_batch.sql, step 10), and the consumer reads the
--   partition from the new position;
-- - `applied_through` keeps the highest position a batch ever wrote, which
--   a set does not move back: a position set below the partition's log
--   start lacks only the records at or past it, so that only records the
--   database never applied count as lost (inbox_position_gap_records_total).

ALTER TABLE inbox_position ADD COLUMN applied_through bigint;

-- A position no operator moved is what the batches wrote; one an operator
-- moved tells nothing of what was applied before.
UPDATE inbox_position SET applied_through = next_offset WHERE NOT moved_by_operator;

GRANT UPDATE (applied_through) ON inbox_position TO inventory_app;

-- The batch statement's check of a position an operator moved: it must be
-- the one this consumer read or wrote (p_expected; it read the new one),
-- else the batch is refused (IX001). Returns the position the batch
-- writes.
CREATE FUNCTION inbox_position_moved(p_topic text, p_partition integer, p_position bigint,
                                     p_expected bigint, p_next bigint)
RETURNS bigint
LANGUAGE plpgsql
AS $$
BEGIN
    IF p_position IS DISTINCT FROM p_expected THEN
        RAISE EXCEPTION 'an operator set the position of %/% to % since this consumer read or wrote %: the batch is not applied, and the partition is read from there',
            p_topic, p_partition, p_position, coalesce(p_expected::text, 'none')
            USING ERRCODE = 'IX001';
    END IF;
    RETURN greatest(p_position, p_next);
END
$$;

REVOKE EXECUTE ON FUNCTION inbox_position_moved(text, integer, bigint, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_position_moved(text, integer, bigint, bigint, bigint) TO inventory_app;
