-- The dedup window: the days that have a ledger partition (SPEC §7).
SELECT d AS day FROM inbox_window_days() AS d
