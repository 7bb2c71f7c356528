-- The (order_id, sku) pairs of the batch that already have a reservation:
-- business duplicates, which reserve nothing again. Set-based: one primary-key
-- probe per pair (LATERAL keeps it an index lookup however large the table
-- grows), all in one statement.
SELECT k.order_id, k.sku
FROM UNNEST($1::text[], $2::text[]) AS k(order_id, sku)
CROSS JOIN LATERAL (
    SELECT 1
    FROM order_reservation r
    WHERE r.order_id = k.order_id AND r.sku = k.sku
) AS r
