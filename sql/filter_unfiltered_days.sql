-- How many closed days of the ledger (yesterday or older) are looked up in
-- full by every batch: no clean filter, or one the slots do not hold yet
-- (docs/design.md#the-filter-of-closed-days); the same days as
-- sql/apply_batch.sql's `closed_day` that are not `filtered`.
SELECT count(*)
FROM inbox_window_days() AS d(event_day)
LEFT JOIN inbox_ledger_filter f ON f.event_day = d.event_day
LEFT JOIN (SELECT u.* FROM inbox_ledger_filter_layout AS layout,
                  unnest(layout.days, layout.built_at) AS u(event_day, built_at)) AS l
       ON l.event_day = d.event_day
WHERE d.event_day < inbox_today()
  AND (f.built_writes IS NULL OR f.built_writes <> f.late_writes OR f.ids > 0)
  AND NOT coalesce(f.built_writes = f.late_writes AND l.built_at = f.built_at, false)
