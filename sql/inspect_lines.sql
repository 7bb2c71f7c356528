-- `inventory-inbox inspect`: the order lines of some orders, on every day
-- reservations are kept (the index on order_id serves it). Every line of
-- each order: those of the events asked about, and those of other events
-- that an event asked about named too (it ignored them: business
-- duplicates).
-- $1: order ids.
SELECT o.order_id, o.sku, o.quantity::integer AS quantity, o.status::text AS status,
       o.message_id, o.reserved_day, o.created_at
FROM order_reservation o
WHERE o.order_id = ANY ($1)
ORDER BY o.created_at, o.order_id, o.sku
