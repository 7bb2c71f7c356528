-- An order's business duplicates found by the order (`inventory-inbox
-- inspect --order`, docs/runbook.md). An event that reserves lines is
-- found through them (order_reservation is indexed by order); a business
-- duplicate writes no line, only its ledger row, whose aggregate_id is the
-- order. Indexed here for those rows alone: a partial index holds the
-- business duplicates (a few in a thousand events), not the 121 million
-- ledger rows of a day that an index of every row's order would hold
-- (about 40 bytes an event on a ledger row of about 160). Made on each
-- day's partition, those made later included.
CREATE INDEX processed_inbox_business_duplicate_idx
    ON processed_inbox (aggregate_id) WHERE status = 'd';
