-- Completes the row of maintenance run $1 with what it did ($2..$6), or the
-- error that stopped it ($7, the counts then NULL).
UPDATE inbox_maintenance_run
SET finished_at = clock_timestamp(),
    locked = $2,
    created = $3,
    dropped = $4,
    parked_deleted = $5,
    payloads_cleared = $6,
    error = $7
WHERE id = $1
