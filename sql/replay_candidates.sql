-- Parked records of one reason not replayed yet, oldest first; $3: only
-- those parked on that day (UTC; NULL: any day), the console's group of a
-- reason and a day. Shared by `parked replay --reason` and the console.
SELECT id FROM inbox_parked
WHERE consumer = $1 AND reason = $2 AND replayed_at IS NULL
  AND ($3::date IS NULL OR parked_day = $3)
ORDER BY id
