-- Ledger rows of one consumer on the event days a run can write: bounded by
-- event_day so that only those days' partitions are scanned.
-- $1: consumer, $2 and $3: the first and last event day.
SELECT count(*) AS ledger_rows
FROM processed_inbox
WHERE consumer = (SELECT code FROM inbox_consumer WHERE name = $1) AND event_day BETWEEN $2 AND $3
