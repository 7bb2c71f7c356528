-- The poison breaker of a consumer: since when, why, and whether resumed.
-- $1: consumer.
SELECT opened_at, reason, resumed_at, resumed_by FROM inbox_breaker WHERE consumer = $1
