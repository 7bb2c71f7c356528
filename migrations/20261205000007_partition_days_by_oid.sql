-- The days that have a partition, read as cheaply as the catalog allows.
--
-- The three functions joined pg_class to pg_inherits with a regular
-- expression on the name, and the planner took the expression's prefix for
-- a range scan of pg_class by name: every partition of the table was read
-- again for each partition, its name matched and its date parsed (17 × 18
-- names for the ledger's 17 days, ~0.7 ms). The batch statement reads
-- inbox_window_days() for every batch (its closed days), and
-- inbox_ledger_filter_may_hold once per call. Now each partition's name is
-- read by its oid, once, and its date cast from the name's eight digits
-- (an ISO 8601 date whatever DateStyle says) instead of to_date.

CREATE OR REPLACE FUNCTION inbox_window_days()
RETURNS SETOF date
LANGUAGE sql STABLE AS $$
    SELECT substr(c.relname, length('processed_inbox_p') + 1)::date
    FROM pg_inherits i
    CROSS JOIN LATERAL (SELECT relname FROM pg_class WHERE oid = i.inhrelid OFFSET 0) AS c
    WHERE i.inhparent = 'processed_inbox'::regclass
      AND c.relname ~ '^processed_inbox_p[0-9]{8}$'
    ORDER BY 1
$$;

CREATE OR REPLACE FUNCTION inbox_reservation_days()
RETURNS SETOF date
LANGUAGE sql STABLE AS $$
    SELECT substr(c.relname, length('order_reservation_p') + 1)::date
    FROM pg_inherits i
    CROSS JOIN LATERAL (SELECT relname FROM pg_class WHERE oid = i.inhrelid OFFSET 0) AS c
    WHERE i.inhparent = 'order_reservation'::regclass
      AND c.relname ~ '^order_reservation_p[0-9]{8}$'
    ORDER BY 1
$$;

CREATE OR REPLACE FUNCTION inbox_parked_days()
RETURNS SETOF date
LANGUAGE sql STABLE AS $$
    SELECT substr(c.relname, length('inbox_parked_p') + 1)::date
    FROM pg_inherits i
    CROSS JOIN LATERAL (SELECT relname FROM pg_class WHERE oid = i.inhrelid OFFSET 0) AS c
    WHERE i.inhparent = 'inbox_parked'::regclass
      AND c.relname ~ '^inbox_parked_p[0-9]{8}$'
    ORDER BY 1
$$;
