-- Parked records of one reason not replayed yet, oldest first.
SELECT id FROM inbox_parked
WHERE consumer = $1 AND reason = $2 AND replayed_at IS NULL
ORDER BY id
