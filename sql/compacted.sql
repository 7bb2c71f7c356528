-- Records an index rebuilt by compaction, and forgets those of days
-- dropped since (docs/design.md#storage). $1: its name, $2: its size before.
WITH gone AS (
    DELETE FROM inbox_compacted k
    WHERE to_regclass(quote_ident(k.index_name)) IS NULL
)
INSERT INTO inbox_compacted (index_name, bytes_before, bytes_after)
VALUES ($1, $2, pg_relation_size(to_regclass(quote_ident($1))))
ON CONFLICT (index_name) DO UPDATE
SET bytes_before = EXCLUDED.bytes_before, bytes_after = EXCLUDED.bytes_after,
    compacted_at = now()
RETURNING bytes_after
