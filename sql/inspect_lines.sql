-- `inventory-inbox inspect`: the order lines of some orders, or of some
-- events, on every day reservations are kept (the index on order_id serves
-- the first; the second is asked only of the orders of those events).
-- $1: order ids, $2: message ids.
SELECT o.order_id, o.sku, o.quantity::integer AS quantity, o.status::text AS status,
       o.message_id, o.reserved_day, o.created_at
FROM order_reservation o
WHERE o.order_id = ANY ($1)
  AND ($2::uuid[] IS NULL OR o.message_id = ANY ($2))
ORDER BY o.created_at, o.order_id, o.sku
