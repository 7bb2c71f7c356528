-- `inventory-inbox parked list` says how many records it chose from
-- ("10 of 97 parked record(s)"): a count of a consumer's parked rows, of
-- one reason, since a time (sql/count_parked.sql), served by this index
-- alone (an index-only scan, whatever the filters), and bounded by a cap.
-- Parked rows are few (invalid records), so it costs next to nothing to
-- write; each day's partition gets it.
CREATE INDEX inbox_parked_consumer_idx ON inbox_parked (consumer, reason, parked_at);
