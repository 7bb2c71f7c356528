-- Records that a maintenance run starts ($1: what started it) and deletes,
-- in the same statement, the runs more than $2 runs back: the table holds
-- at most $2 small rows, whatever the months of hourly runs (a delete of a
-- row or so by the primary key, not of bulk data).
WITH begun AS (
    INSERT INTO inbox_maintenance_run (started_by)
    VALUES ($1)
    RETURNING id
), pruned AS (
    DELETE FROM inbox_maintenance_run AS r
    USING begun
    WHERE r.id <= begun.id - $2
)
SELECT id
FROM begun
