-- How many closed days of the ledger (yesterday or older) are looked up in
-- full by every batch: no filter built yet, or one that missed a late
-- write since (docs/design.md#the-filter-of-closed-days); the same days as
-- sql/apply_batch.sql's `closed_day` that are not `filtered`.
SELECT count(*)
FROM inbox_window_days() AS d(event_day)
LEFT JOIN inbox_ledger_filter f ON f.event_day = d.event_day
WHERE d.event_day < inbox_today()
  AND f.built_writes IS DISTINCT FROM f.late_writes
