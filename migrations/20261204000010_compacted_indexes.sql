-- The indexes of closed days that `inventory-inbox maintain`, run as the
-- owner, rebuilt (docs/design.md#storage). A day's ledger and reservation
-- indexes fill in the order events arrive (random message ids, order ids
-- out of order): about half of each page is empty when the day closes.
-- Rebuilt once the day is closed (REINDEX INDEX CONCURRENTLY: writes go on),
-- they hold the same entries in two thirds of the bytes, for the rest of
-- the retention.
CREATE TABLE inbox_compacted (
    index_name   text        PRIMARY KEY,
    bytes_before bigint      NOT NULL,
    bytes_after  bigint      NOT NULL,
    compacted_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT ON inbox_compacted TO inventory_app;
