-- The parked rows whose DLQ copies the topic confirmed.
UPDATE inbox_parked SET dlq_sent_at = now()
WHERE id = ANY ($1::bigint[]) AND dlq_sent_at IS NULL
