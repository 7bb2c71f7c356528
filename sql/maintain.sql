-- Creates the ledger partitions of the window that are missing, as
-- inbox_settings says, under an advisory lock: one instance does the work,
-- the others skip (docs/design.md#the-dedup-window). Its own transaction:
-- the days ahead are kept whatever the next step does.
SELECT locked, created
FROM inbox_create_window()
