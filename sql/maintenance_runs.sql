-- The last $1 maintenance runs, newest first, and the last one that did the
-- work and ended well (held the lock, no error) when it is older: what the
-- console's overview says of maintenance. Both by the primary key, on a
-- table of a few hundred rows at most.
(SELECT id, started_at, started_by, finished_at, locked, created, dropped,
        parked_deleted, payloads_cleared, error
 FROM inbox_maintenance_run
 ORDER BY id DESC
 LIMIT $1)
UNION
(SELECT id, started_at, started_by, finished_at, locked, created, dropped,
        parked_deleted, payloads_cleared, error
 FROM inbox_maintenance_run
 WHERE locked AND error IS NULL
 ORDER BY id DESC
 LIMIT 1)
ORDER BY id DESC
