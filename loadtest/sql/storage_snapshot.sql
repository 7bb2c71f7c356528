-- The sizes `make bench-scale` compares before and after a run: per table
-- (its partitions summed) the heap and index bytes, the rows (exact), the
-- autovacuum and autoanalyze runs; and the WAL position. One line each:
-- name heap_bytes index_bytes rows autovacuums autoanalyzes.
WITH parts AS (
    SELECT t.name, c.oid
    FROM (VALUES ('processed_inbox'), ('order_reservation'), ('inbox_parked'),
                 ('inventory_stock'), ('inbox_position'), ('inbox_ledger_filter_chunk'),
                 ('inbox_ledger_filter_slot')) AS t(name)
    JOIN pg_class p ON p.relname = t.name
    JOIN pg_class c ON c.oid = p.oid
                    OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = p.oid)
)
SELECT p.name,
       sum(pg_relation_size(p.oid))::bigint,
       sum(pg_indexes_size(p.oid))::bigint,
       (xpath('/row/n/text()',
              query_to_xml(format('SELECT count(*) AS n FROM %I', p.name), false, true, '')))[1]::text::bigint,
       coalesce(sum(s.autovacuum_count), 0)::bigint,
       coalesce(sum(s.autoanalyze_count), 0)::bigint
FROM parts p
LEFT JOIN pg_stat_user_tables s ON s.relid = p.oid
GROUP BY p.name
UNION ALL
SELECT 'wal', pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, 0, 0, 0, 0
ORDER BY 1
