-- The retention of the database's tables, set by `inventory-inbox migrate`
-- as the owner role (docs/design.md#the-dedup-window, #storage). Returns
-- the settings as they were before.
WITH before AS (
    SELECT retention_days, premake_days, parked_retention_days, parked_payload_days,
           reservation_retention_days, reservation_expiry
    FROM inbox_settings
    FOR UPDATE
), changed AS (
    UPDATE inbox_settings
    SET retention_days = $1, premake_days = $2, parked_retention_days = $3,
        parked_payload_days = $4, reservation_retention_days = $5,
        reservation_expiry = $6, updated_at = now()
)
SELECT retention_days, premake_days, parked_retention_days, parked_payload_days,
       reservation_retention_days, reservation_expiry
FROM before
