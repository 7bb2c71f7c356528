-- The floor of the batch statement (`make bench`, SPEC §19,
-- docs/benchmarks.md#the-floor-and-reading-the-figures): the rows the statement writes for one
-- batch of 100 fresh events of the bench's mix, written bare, in one
-- statement of its own transaction like the real one: the 100 ledger rows,
-- their order lines, the aggregated per-SKU stock update and the
-- partition's position. No look-up, no check, no lock taken before
-- writing: what the batch statement does beyond this is its cost over the
-- floor. Each run takes the next batch made by scripts/bench/floor-setup.sql
-- (pgbench, one connection, prepared, as many transactions as batches).
-- Only columns every schema since 2026-12-04 has, so that an A/B of an
-- older build (INBOX_BIN_DIR) measures its floor on its own schema.
WITH batch AS MATERIALIZED (
    SELECT nextval('floor_batch') AS number
),
ledger AS (
    INSERT INTO processed_inbox (message_id, kafka_offset, payload_hash, processed_at,
                                 event_day, kafka_partition, status, consumer, topic,
                                 aggregate_id)
    SELECT e.message_id, e.n, hashtext(e.order_id), clock_timestamp(), current_date, 0,
           'p', c.code, t.code, e.order_id
    FROM floor_event e
    CROSS JOIN (SELECT code FROM inbox_consumer WHERE name = 'floor') AS c
    CROSS JOIN (SELECT code FROM inbox_topic WHERE name = 'floor') AS t
    WHERE e.batch = (SELECT number FROM batch)
    ORDER BY e.message_id
    RETURNING 1
),
reservation AS (
    INSERT INTO order_reservation (message_id, reserved_day, status, quantity, order_id, sku)
    SELECT message_id, current_date, 'reserved', quantity, order_id, sku
    FROM floor_line
    WHERE batch = (SELECT number FROM batch)
    ORDER BY order_id, sku
    RETURNING sku, quantity
),
stock AS (
    UPDATE inventory_stock AS s
    SET reserved = s.reserved + d.quantity, updated_at = now()
    FROM (SELECT sku, sum(quantity) AS quantity FROM reservation GROUP BY sku) AS d
    WHERE s.sku = d.sku
    RETURNING 1
),
next_position AS (
    INSERT INTO inbox_position AS p (consumer, topic, kafka_partition, next_offset)
    VALUES ('floor', 'floor', 0, 100)
    ON CONFLICT (consumer, topic, kafka_partition) DO UPDATE
        SET next_offset = p.next_offset + 100, updated_at = now()
    RETURNING 1
)
SELECT (SELECT count(*) FROM ledger) AS ledger_rows,
       (SELECT count(*) FROM reservation) AS order_lines,
       (SELECT count(*) FROM stock) AS stock_rows,
       (SELECT count(*) FROM next_position) AS positions;
