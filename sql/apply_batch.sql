-- Applies one batch: the batch function (inbox_apply_batch, as it is now
-- in docs/schema.sql, last made by migrations/20261207002001; its steps are named
-- there), called in ONE statement sent on its own, so a batch costs one
-- round trip to the database and is its own transaction
-- (docs/design.md#the-batch-transaction): it commits with its answer,
-- nothing of it is visible until then, and a failure anywhere rolls all of
-- it back.
--
-- Parameters, each named and typed (migrations/20261206000005):
--   $1 the ledger's consumer;
--   $2 the records of the batch in poll order, inbox_batch_record[];
--   $3 the order lines of the candidates, inbox_batch_line[];
--   $4 the partitions it moves, inbox_batch_partition[];
--   $5 the trace id of the batch's span (null when tracing is off), kept on
--      its parked rows;
--   $6 whether parked records are copied to a DLQ topic.
SELECT * FROM inbox_apply_batch($1::text, $2::inbox_batch_record[], $3::inbox_batch_line[],
                                $4::inbox_batch_partition[], $5::text, $6::boolean)
