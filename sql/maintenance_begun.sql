-- Records that a maintenance run starts ($1: what started it) and deletes,
-- in the same call, the runs more than $2 runs back: the table holds at
-- most $2 small rows, whatever the months of hourly runs (a delete of a
-- row or so by the primary key, not of bulk data). The run's id.
SELECT inbox_maintenance_begun($1, $2) AS id
