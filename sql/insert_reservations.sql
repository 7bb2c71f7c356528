-- Records the fresh events' order lines, reserved or rejected. The primary
-- key (order_id, sku) makes reservations idempotent on the business key: a
-- second event for the same order line inserts nothing. RETURNING gives the
-- lines actually inserted, which alone move stock. One statement per batch.
INSERT INTO order_reservation (order_id, sku, quantity, status, message_id)
SELECT *
FROM UNNEST($1::text[], $2::text[], $3::int[], $4::text[], $5::uuid[])
ON CONFLICT DO NOTHING
RETURNING sku, quantity, status
