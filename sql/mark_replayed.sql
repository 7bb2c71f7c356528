-- Records the outcome of a replay on the parked row, which is kept. The row
-- is marked replayed only when the event reached the ledger (applied, or
-- found to be a duplicate); otherwise it stays eligible for another replay.
-- Every replay is appended to the row's history (`replays`: when, the
-- outcome, who; oldest first), which keeps the last $5: the oldest goes
-- once it is full, so a row's history is bounded, and it goes with its row.
UPDATE inbox_parked
SET replayed_at = CASE WHEN $3 THEN now() ELSE replayed_at END,
    replay_outcome = $2,
    replays = CASE WHEN jsonb_array_length(coalesce(replays, '[]')) >= $5
                   THEN replays - 0
                   ELSE coalesce(replays, '[]')
              END
              || jsonb_build_array(jsonb_build_object('at', now(), 'outcome', $2, 'by', $4))
WHERE id = $1
