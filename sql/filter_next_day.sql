-- The next closed day of the ledger (over by the database's clock:
-- yesterday or older) whose filter is missing, or missed a late write since
-- it was built, or was built without the day's order ids
-- (docs/design.md#the-filter-of-closed-days); the ready ones,
-- newest first. `ready`: every transaction that could have written the day
-- without counting it has ended (none older than its closed_xid runs), so
-- that a snapshot taken now holds all they committed.
SELECT f.event_day, pg_snapshot_xmin(pg_current_snapshot()) >= f.closed_xid AS ready
FROM inbox_ledger_filter f
WHERE f.event_day < inbox_today()
  AND f.closed_xid IS NOT NULL
  AND (f.built_writes IS DISTINCT FROM f.late_writes OR f.orders IS NULL)
  AND f.event_day IN (SELECT d FROM inbox_window_days() AS d)
ORDER BY ready DESC, f.event_day DESC
LIMIT 1
