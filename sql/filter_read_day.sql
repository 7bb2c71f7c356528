-- The two hashes of every message id of one day of the ledger and of
-- every order id of the same day of order_reservation, for the day's
-- filter (src/store/filter.rs), read a page at a time through a cursor of
-- the build's transaction; the look-ups hash alike (inbox_ledger_seen,
-- inbox_reservations_seen).
DECLARE inbox_filter_ids NO SCROLL CURSOR FOR
SELECT uuid_hash_extended(p.message_id, 0), uuid_hash_extended(p.message_id, 1)
FROM processed_inbox p
WHERE p.event_day = $1
UNION ALL
SELECT hashtextextended(o.order_id, 0), hashtextextended(o.order_id, 1)
FROM (SELECT DISTINCT r.order_id FROM order_reservation r WHERE r.reserved_day = $1) AS o
