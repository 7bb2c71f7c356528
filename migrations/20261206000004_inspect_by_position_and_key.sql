-- Two look-ups of `inventory-inbox inspect` that no index served
-- (docs/runbook.md, "Was it applied?"):
--
-- 1. A record the topic no longer holds (retention deleted it), asked about
--    by `--offset P:O`: the ledger row written from that position. The
--    ledger is only keyed by message id, and a btree on the position costs
--    about 30 bytes an event against a budget of 160 (a row is 138 to 156
--    already). A BRIN index costs about 0.04 bytes an event: one summary per
--    128 heap pages (about 1 MB, 10,000 rows). Rows go into a day's heap in
--    the order they are applied, so a range holds a stretch of each Kafka
--    partition's offsets, one cluster per partition; `minmax_multi` keeps
--    up to 32 values a range (16 intervals), so each cluster stays apart
--    and a look-up reads the ranges whose partitions passed that offset,
--    whatever the skew between partitions (a plain min/max spans them all:
--    measured, 16,000 pages read against 128 for one skewed day of 1.3 M
--    rows). With more than 16 partitions written into one range the
--    nearest clusters are merged and a look-up reads more ranges, never a
--    wrong row (rows are rechecked). `autosummarize` summarizes each range
--    when the next begins, so only the range being written is read whole.
--    A row's insert costs a look at the range map and no write while its
--    range is open: no difference beyond noise in a pgbench of batches of
--    100 (1.56 against 1.55 ms a batch, four alternating runs of 15 s).
--
-- 2. `--order O` of an order whose only events were parked (an unknown
--    SKU): parked rows by the record key, which is the order id (SPEC §4).
--    Parked rows are few in a healthy week; the entry is the key's bytes.
--
-- On a database holding months of ledger, build each day's index first
-- (`CREATE INDEX CONCURRENTLY ... ON processed_inbox_pYYYYMMDD USING brin
-- (kafka_offset int8_minmax_multi_ops) WITH (autosummarize = on)`, writes
-- go on): this statement then attaches them instead of reading every day's
-- heap while it holds the table.

CREATE INDEX processed_inbox_offset_idx ON processed_inbox
    USING brin (kafka_offset int8_minmax_multi_ops) WITH (autosummarize = on);

CREATE INDEX inbox_parked_key_idx ON inbox_parked (record_key);
