-- Records the outcome of a replay on the parked row, which is kept. The row
-- is marked replayed only when the event reached the ledger (applied, or
-- found to be a duplicate); otherwise it stays eligible for another replay.
UPDATE inbox_parked
SET replayed_at = CASE WHEN $3 THEN now() ELSE replayed_at END,
    replay_outcome = $2
WHERE id = $1
