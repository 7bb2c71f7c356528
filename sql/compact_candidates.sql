-- The B-tree indexes of the ledger's and the reservations' days two days
-- old or older (late events for yesterday still arrive in numbers) not
-- rebuilt yet, with their size; whether this session owns the tables (only
-- the owner may rebuild them). docs/design.md#storage. A BRIN index (the
-- ledger's on kafka_offset) has nothing to compact: a rebuild would only
-- read the day's heap again.
SELECT c.relname AS index_name, pg_relation_size(c.oid) AS bytes,
       pg_has_role(current_user, t.relowner, 'USAGE') AS owner
FROM pg_inherits i
JOIN pg_class t ON t.oid = i.inhrelid
JOIN pg_index x ON x.indrelid = t.oid
JOIN pg_class c ON c.oid = x.indexrelid
JOIN pg_am a ON a.oid = c.relam AND a.amname = 'btree'
WHERE i.inhparent IN ('processed_inbox'::regclass, 'order_reservation'::regclass)
  AND t.relname ~ '_p[0-9]{8}$'
  AND to_date(right(t.relname, 8), 'YYYYMMDD') < inbox_today() - 1
  AND pg_relation_size(c.oid) > 8192 * 4
  AND NOT EXISTS (SELECT FROM inbox_compacted k WHERE k.index_name = c.relname)
ORDER BY c.relname
