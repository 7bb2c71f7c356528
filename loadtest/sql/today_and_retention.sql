-- The database's today and the ledger's retention in days: the dedup window
-- the reference model judges event days by.
SELECT inbox_today() AS today, retention_days::bigint AS retention_days
FROM inbox_settings
