-- `reserved` of each seeded SKU, for the snapshots reconciliation compares.
-- $1: the SKUs.
SELECT sku, reserved FROM inventory_stock WHERE sku = ANY($1)
