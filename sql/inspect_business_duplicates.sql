-- `inventory-inbox inspect --order`: the ids of the order's business
-- duplicates, which wrote no order line to be found by (the partial index
-- of migrations/20261206000007). $1: consumer, $2: the order.
SELECT l.message_id
FROM processed_inbox l
WHERE l.aggregate_id = $2
  AND l.status = 'd'
  AND l.consumer = (SELECT code FROM inbox_consumer WHERE name = $1)
