-- An id is applied once within the dedup window, whatever day its event
-- time names (docs/design.md#the-batch-transaction): the ledger's key holds
-- event_day, so an id reused with another day's event time would not
-- conflict with it. The batch statement looks every candidate id up in this
-- index, on every day of the window, before it writes.
CREATE INDEX idx_inbox_message_lookup ON processed_inbox (message_id);

-- The batch statement decides fresh, duplicate and conflict from that
-- look-up and inserts the fresh events with ON CONFLICT DO NOTHING: it no
-- longer rewrites a ledger row to see it.
REVOKE UPDATE (payload_hash) ON processed_inbox FROM inventory_app;

-- Ends the batch statement with SQLSTATE `code` (nothing of it commits):
--   IX002: a record repeats the id of an earlier record of the statement
--          that the statement parks (unknown SKU), with another payload;
--          the consumer applies the batch in two statements, split before
--          the record at ordinal `detail`, so that it is judged as it
--          would be in a later batch.
--   IX003: a concurrent transaction committed a ledger row or a
--          reservation that this statement's snapshot did not show (lanes,
--          or two members during a rebalance); the consumer runs the
--          statement again at once, with a new snapshot.
CREATE FUNCTION inbox_refuse(code text, message text, detail text)
RETURNS integer
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message, DETAIL = coalesce(detail, '');
END
$$;

REVOKE EXECUTE ON FUNCTION inbox_refuse(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_refuse(text, text, text) TO inventory_app;
