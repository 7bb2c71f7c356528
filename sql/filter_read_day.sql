-- The words of one day's filter that hold a key, in order, each with its
-- bits: every message id of the day of the ledger and every order id of
-- the same day of order_reservation, at its word of $2 (the low 31 bits of
-- its first hash mod $2) with its 7 bits (inbox_filter_mask of its second
-- hash). The database groups them, so that the builder
-- (src/store/filter.rs) holds a statement's words at a time, not the
-- filter; read a page at a time through a cursor of the build's
-- transaction. The look-ups hash alike (inbox_ledger_seen,
-- inbox_reservations_seen).
DECLARE inbox_filter_words NO SCROLL CURSOR FOR
SELECT k.word, bit_or(k.mask)
FROM (SELECT (uuid_hash_extended(p.message_id, 0) & 2147483647) % $2 AS word,
             inbox_filter_mask(uuid_hash_extended(p.message_id, 1)) AS mask
      FROM processed_inbox p
      WHERE p.event_day = $1
      UNION ALL
      SELECT (hashtextextended(o.order_id, 0) & 2147483647) % $2,
             inbox_filter_mask(hashtextextended(o.order_id, 1))
      FROM (SELECT DISTINCT r.order_id FROM order_reservation r
            WHERE r.reserved_day = $1) AS o) AS k
GROUP BY k.word
ORDER BY k.word
