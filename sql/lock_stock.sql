-- Locks the stock rows a batch may reserve from and reads what is available.
-- Rows are locked in SKU order, so two consumers whose batches share SKUs
-- always take the locks in the same order and cannot deadlock. One statement
-- for the whole batch: $1 is the batch's distinct SKUs.
SELECT sku, on_hand - reserved AS available
FROM inventory_stock
WHERE sku = ANY($1::text[])
ORDER BY sku
FOR UPDATE
