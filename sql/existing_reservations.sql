-- The (order_id, sku) pairs of the batch that already have a reservation:
-- business duplicates, which reserve nothing again. Set-based: one probe of
-- the primary key per pair, all in one statement.
SELECT r.order_id, r.sku
FROM UNNEST($1::text[], $2::text[]) AS k(order_id, sku)
JOIN order_reservation r USING (order_id, sku)
