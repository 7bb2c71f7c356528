-- Applies the batch's reservations to stock: ONE update per SKU per batch,
-- with the quantities already summed per SKU ($1 distinct SKUs, $2 sums).
-- The CHECK constraints keep 0 <= reserved <= on_hand whatever happens.
UPDATE inventory_stock AS s
SET reserved = s.reserved + d.quantity,
    updated_at = now()
FROM UNNEST($1::text[], $2::bigint[]) AS d(sku, quantity)
WHERE s.sku = d.sku
