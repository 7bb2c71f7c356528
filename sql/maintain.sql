-- Creates the ledger partitions of the window, drops those older than it and
-- prunes old parked rows, under an advisory lock: one instance does the work,
-- the others skip (docs/design.md#the-dedup-window).
SELECT locked, created, dropped, parked_deleted, payloads_cleared
FROM inbox_maintain($1, $2, $3, $4)
