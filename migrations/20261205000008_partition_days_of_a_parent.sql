-- The days that have a partition, for any of the tables kept by the day:
-- one function instead of three copies of one query, and the fourth, the
-- fallback of inbox_write_day, no longer matches every name of pg_class
-- with a regular expression.
--
-- Each partition's name is read by its oid (not by a range scan of names
-- from the expression's prefix, see 20261205000007) and its date cast from
-- the name's eight digits. The three named functions stay, for the callers
-- that use them, and are inlined into their callers as before; the parent
-- is named by its text, so that the pattern of its partitions' names is a
-- constant once inlined, compiled once.

CREATE FUNCTION inbox_partition_days(parent text)
RETURNS SETOF date
LANGUAGE sql STABLE AS $$
    SELECT substr(c.relname, length(parent) + 3)::date
    FROM pg_inherits i
    CROSS JOIN LATERAL (SELECT relname FROM pg_class WHERE oid = i.inhrelid OFFSET 0) AS c
    WHERE i.inhparent = parent::regclass
      AND c.relname ~ ('^' || parent || '_p[0-9]{8}$')
    ORDER BY 1
$$;

CREATE OR REPLACE FUNCTION inbox_window_days()
RETURNS SETOF date
LANGUAGE sql STABLE AS $$
    SELECT d FROM inbox_partition_days('processed_inbox') AS d
$$;

CREATE OR REPLACE FUNCTION inbox_reservation_days()
RETURNS SETOF date
LANGUAGE sql STABLE AS $$
    SELECT d FROM inbox_partition_days('order_reservation') AS d
$$;

CREATE OR REPLACE FUNCTION inbox_parked_days()
RETURNS SETOF date
LANGUAGE sql STABLE AS $$
    SELECT d FROM inbox_partition_days('inbox_parked') AS d
$$;

-- Today, or, should maintenance have failed for longer than the days it
-- makes ahead, the newest day that has a partition (a batch never fails for
-- a missing day).
CREATE OR REPLACE FUNCTION inbox_write_day(parent text)
RETURNS date
LANGUAGE plpgsql STABLE
SET search_path = public, pg_temp
AS $$
DECLARE
    today date := inbox_today();
BEGIN
    IF to_regclass(parent || '_p' || to_char(today, 'YYYYMMDD')) IS NOT NULL THEN
        RETURN today;
    END IF;
    RETURN (SELECT max(d) FROM inbox_partition_days(parent) AS d);
END;
$$;

GRANT EXECUTE ON FUNCTION inbox_partition_days(text) TO inventory_app;
