-- Events per minute by outcome, as the consumer's members counted them
-- after each batch's commit: the console's chart of the last hour. It was
-- read from the ledger by processed_at, which has no index (one would cost
-- every batch), so the chart scanned today's and yesterday's partitions:
-- 0.8–1.3 s at 3.3 million events a day, a minute at 121 million.
--
-- A ring of 120 minutes per consumer and outcome, written over in place:
-- the row of a minute's slot is taken by the next minute that falls on it
-- (two hours later), so the table holds at most 120 rows per consumer and
-- outcome whatever the traffic, and nothing prunes it. A member adds its
-- counts every few seconds (store::outcomes::flush_outcomes), never inside
-- a batch's transaction: no batch waits on another member's row.
CREATE TABLE inbox_outcome_minute (
    consumer text        NOT NULL,
    -- The minute's place in the ring: minutes since the epoch, modulo 120.
    slot     smallint    NOT NULL CHECK (slot BETWEEN 0 AND 119),
    -- processed, business_duplicate, duplicate or parked.
    outcome  text        NOT NULL,
    minute   timestamptz NOT NULL,
    events   bigint      NOT NULL,
    PRIMARY KEY (consumer, slot, outcome)
);
GRANT SELECT, INSERT, UPDATE ON inbox_outcome_minute TO inventory_app;
GRANT SELECT ON inbox_outcome_minute TO inventory_operator;
