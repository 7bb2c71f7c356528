-- The poison breaker's state, one row per ledger consumer: opened by a
-- consumer that parked too many records in a row (or too large a share of
-- them), and held until an operator resumes it (`inventory-inbox breaker
-- resume`). Every member of the consumer reads it: one that starts while it
-- is held holds too.
CREATE TABLE inbox_breaker (
    consumer   text        PRIMARY KEY,
    opened_at  timestamptz NOT NULL,
    reason     text        NOT NULL,
    resumed_at timestamptz,
    resumed_by text
);
GRANT SELECT, INSERT, UPDATE ON inbox_breaker TO inventory_app;
