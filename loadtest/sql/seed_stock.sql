-- Seeds the load generator's SKUs: creates them, or raises their stock, so
-- that no line of a run is ever rejected for want of stock. `reserved` is
-- left as it is: reconciliation compares its increase over the run.
-- $1: the SKUs, $2: the stock to give each (on top of what is reserved).
INSERT INTO inventory_stock (sku, on_hand, reserved)
SELECT sku, $2, 0 FROM UNNEST($1::text[]) AS s(sku)
ON CONFLICT (sku) DO UPDATE
SET on_hand = GREATEST(inventory_stock.on_hand, inventory_stock.reserved + $2)
