-- `inventory-inbox inspect --event` finds an event's parked rows by its
-- message id. Parked rows are few (invalid records), so this index costs
-- next to nothing to write; each day's partition gets it.
CREATE INDEX inbox_parked_message_idx ON inbox_parked (message_id);
