-- The next closed day of the ledger (two days old or older) whose filter is
-- missing, or missed a late write since it was built
-- (docs/design.md#the-filter-of-closed-days); the newest first.
SELECT f.event_day
FROM inbox_ledger_filter f
WHERE f.event_day < inbox_today() - 1
  AND f.built_writes IS DISTINCT FROM f.late_writes
  AND f.event_day IN (SELECT d FROM inbox_window_days() AS d)
ORDER BY f.event_day DESC
LIMIT 1
