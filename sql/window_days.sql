-- The dedup window: the days that have a ledger partition (docs/design.md#the-dedup-window).
SELECT d AS day FROM inbox_window_days() AS d
