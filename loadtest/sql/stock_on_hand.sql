-- Every SKU and its stock on hand: the SKUs the reference model knows.
SELECT sku, on_hand::bigint AS on_hand FROM inventory_stock
