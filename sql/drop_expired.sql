-- Drops the ledger partitions older than the window, as inbox_settings says,
-- under the same advisory lock (docs/design.md#the-dedup-window).
SELECT locked, dropped
FROM inbox_drop_expired()
