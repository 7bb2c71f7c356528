-- The two hashes of every message id of one day of the ledger, for its
-- filter (src/store/filter.rs), read a page at a time through a cursor of
-- the build's transaction; the look-up hashes alike (sql/apply_batch.sql).
DECLARE inbox_filter_ids NO SCROLL CURSOR FOR
SELECT uuid_hash_extended(p.message_id, 0), uuid_hash_extended(p.message_id, 1)
FROM processed_inbox p
WHERE p.event_day = $1
