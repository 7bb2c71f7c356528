-- Creates the partitions of the window and drops those older than it, under
-- an advisory lock: one instance does the work, the others skip (SPEC §7).
SELECT locked, created, dropped FROM inbox_maintain($1, $2)
