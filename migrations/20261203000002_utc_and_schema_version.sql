-- Maintenance counts days in UTC, as event days are (the UTC date of the
-- event time): called from a session whose TimeZone is elsewhere, its
-- current_date would otherwise be another day, and it would make or drop
-- the partitions of a window shifted by a day.
ALTER FUNCTION inbox_maintain(integer, integer, integer, integer) SET timezone = 'UTC';

-- `run` checks at start-up that the database holds the schema it was built
-- for (neither older nor newer), which the application role must be able to
-- read.
GRANT SELECT ON _sqlx_migrations TO inventory_app;
