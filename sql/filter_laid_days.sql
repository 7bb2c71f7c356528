-- The closed days whose filters the slots lay out
-- (docs/design.md#the-filter-of-closed-days): those of the window with a
-- clean filter that holds an id (a clean one that holds none rules out
-- every id without the slots), in day order.
SELECT f.event_day, f.built_at, f.words
FROM inbox_ledger_filter f
WHERE f.event_day < inbox_today()
  AND f.event_day IN (SELECT d FROM inbox_window_days() AS d)
  AND f.built_writes = f.late_writes
  AND f.ids > 0
ORDER BY f.event_day
