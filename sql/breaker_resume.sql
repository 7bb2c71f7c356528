-- An operator resumes a held breaker; returns the row when it was held.
-- $1: consumer.
UPDATE inbox_breaker SET resumed_at = now(), resumed_by = current_user
WHERE consumer = $1 AND resumed_at IS NULL
RETURNING opened_at, reason, resumed_at, resumed_by
