-- The poison breaker opens for a consumer (held until resumed).
-- $1: consumer, $2: why.
INSERT INTO inbox_breaker (consumer, opened_at, reason)
VALUES ($1, now(), $2)
ON CONFLICT (consumer) DO UPDATE
    SET opened_at = now(), reason = EXCLUDED.reason, resumed_at = NULL, resumed_by = NULL
