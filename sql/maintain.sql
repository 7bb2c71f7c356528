-- Creates the ledger partitions of the window and drops those older than it,
-- as inbox_settings says, under an advisory lock: one instance does the
-- work, the others skip (docs/design.md#the-dedup-window).
SELECT locked, created, dropped
FROM inbox_maintain()
