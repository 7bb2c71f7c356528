-- A batch refuses to move a position when the database's position is behind
-- the one this consumer last wrote for that partition: the database went
-- back (restored from a backup, or failed over to a replica that had not
-- received the last commits) while the consumer kept running. Nothing of the
-- batch commits; the consumer reads the partition again from the
-- database's position (SPEC §13). SQLSTATE IX001 tells it so.
CREATE FUNCTION inbox_position_behind(p_topic text, p_partition integer,
                                      p_position bigint, p_expected bigint)
RETURNS integer
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION 'the database''s position of %/% is % but this consumer wrote %: the database went back',
        p_topic, p_partition, coalesce(p_position::text, 'none'), p_expected
        USING ERRCODE = 'IX001';
END
$$;

REVOKE EXECUTE ON FUNCTION inbox_position_behind(text, integer, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_position_behind(text, integer, bigint, bigint) TO inventory_app;
