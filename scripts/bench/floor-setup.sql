-- Sets up the floor of the batch statement (scripts/bench/floor.sql) on a
-- migrated database: the mix's 1,000 SKUs in stock, the codes of consumer
-- and topic `floor`, and :batches batches of 100 fresh events of the
-- bench's mix (1-5 lines an order, half of the lines on 10 hot SKUs), made
-- beforehand so that the floor times writing them, not making them.
-- psql -v batches=N -f scripts/bench/floor-setup.sql
INSERT INTO inventory_stock (sku, on_hand)
SELECT 'LG-SKU-' || lpad(i::text, 5, '0'), 1000000000000
FROM generate_series(0, 999) AS i
ON CONFLICT (sku) DO NOTHING;
SELECT inbox_consumer_code('floor'), inbox_topic_code('floor');

CREATE UNLOGGED TABLE floor_event AS
SELECT b AS batch, n, gen_random_uuid() AS message_id,
       'FLOOR-' || gen_random_uuid() AS order_id, 1 + floor(random() * 5)::integer AS lines
FROM generate_series(1, :batches) AS b, generate_series(1, 100) AS n;
CREATE INDEX ON floor_event (batch);

CREATE UNLOGGED TABLE floor_line AS
SELECT DISTINCT ON (order_id, sku) batch, message_id, order_id, sku, quantity
FROM (SELECT e.batch, e.message_id, e.order_id,
             'LG-SKU-' || lpad((CASE WHEN random() < 0.5 THEN floor(random() * 10)
                                     ELSE floor(random() * 1000) END)::integer::text,
                               5, '0') AS sku,
             1 + floor(random() * 3)::integer AS quantity
      FROM floor_event e
      CROSS JOIN LATERAL generate_series(1, e.lines) AS l(i)) AS drawn
ORDER BY order_id, sku;
CREATE INDEX ON floor_line (batch);

CREATE SEQUENCE floor_batch;
ANALYZE floor_event, floor_line;
