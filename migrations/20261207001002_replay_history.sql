-- Every replay of a parked record and its outcome, not only the last
-- (replay_outcome): a JSON array of {"at", "outcome", "by"}, oldest first,
-- on the parked row itself. Bounded twice: the last 20 replays of a row
-- (sql/mark_replayed.sql drops the oldest), and it lives and goes with its
-- row (the parked rows' retention: their day's partition is dropped). NULL:
-- never replayed.
ALTER TABLE inbox_parked ADD COLUMN replays jsonb;
GRANT SELECT (replays) ON inbox_parked TO inventory_operator;
