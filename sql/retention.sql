-- The retention of the database's tables (inbox_settings), as the owner set
-- it at `inventory-inbox migrate`.
SELECT retention_days, premake_days, parked_retention_days, parked_payload_days,
       reservation_retention_days, reservation_expiry
FROM inbox_settings
