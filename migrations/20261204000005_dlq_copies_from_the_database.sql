-- A parked record's copy on the DLQ topic follows from its row, not from one
-- in-memory answer: a batch whose answer was lost after its commit, or a
-- member killed between the commit and the copy, left rows whose copies
-- were never sent. Each row says whether its copy is still owed
-- (dlq_sent_at NULL) and keeps the record's key for it; the consumer owning
-- the partition sends what is owed and marks it sent.
ALTER TABLE inbox_parked
    ADD COLUMN record_key bytea,
    ADD COLUMN dlq_sent_at timestamptz;

-- Rows parked before were copied then, as well as they could be.
UPDATE inbox_parked SET dlq_sent_at = parked_at;

CREATE INDEX inbox_parked_dlq_owed_idx ON inbox_parked (consumer, topic, kafka_partition, id)
    WHERE dlq_sent_at IS NULL;

GRANT UPDATE (dlq_sent_at) ON inbox_parked TO inventory_app;
