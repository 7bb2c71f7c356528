-- Applies one batch in ONE statement, so a batch costs one round trip to the
-- database (docs/design.md#the-batch-transaction): sent on its own, the statement is its own transaction
-- and commits with its result; nothing of it is visible until then, and a
-- failure anywhere rolls all of it back.
--
-- The steps of docs/design.md#the-batch-transaction, each a set operation over the whole batch:
--   1. find every event that names an unknown SKU;
--   2. look every candidate id up in the ledger, on every day of the window:
--      its id there with the same payload fingerprint is a duplicate, with
--      another an id conflict (parked); otherwise an unknown SKU parks it,
--      or it is fresh;
--   3. lock the stock rows of every SKU the fresh events name, in SKU
--      order, so concurrent batches cannot deadlock on them;
--   4. then, with its own snapshot, read what the reservations of the
--      window hold of the fresh events' orders: a line reserved before, or
--      earlier in the batch, is a business duplicate and reserves nothing;
--   5. the fresh events' ledger rows: INSERT ... ON CONFLICT DO NOTHING
--      RETURNING message_id;
--   6-7. first-come allocation of the new lines in batch order against the
--      locked stock, recorded in order_reservation;
--   8. ONE aggregated UPDATE per SKU of the stock actually reserved;
--   9. the parked rows (invalid records, unknown SKUs, conflicts, db_rejected)
--      in the same transaction, idempotent on (consumer, topic, partition,
--      offset);
--   10. the partitions' next offsets in inbox_position (only forward).
-- Every sub-statement but step 4 sees the snapshot taken when the statement
-- began, and a concurrent batch (another lane, another member during a
-- rebalance) may commit after it. An order line is only ever written under
-- the lock of its SKU, and step 4 reads once those locks are held: a line
-- a concurrent batch reserved is seen, whatever day's partition it is in.
-- A ledger row that conflicts when written is one this statement could not
-- see (the same event, read twice during a rebalance), and the statement
-- ends (IX003) to run again. Rows are inserted in key order, so that two
-- batches inserting the same keys wait, never deadlock. The position,
-- which two members may share during a rebalance, is written last.
--
-- Parameters, each named and typed (migrations/20261206000005):
--   $1 the ledger's consumer;
--   $2 the records of the batch in poll order, inbox_batch_record[]: each
--      a 'candidate' (valid, in the window, its id first in the statement;
--      a record whose id came only in an earlier statement is one), a
--      'repeat' (its id came earlier in the statement, at `first_ord`) or
--      'parked' (invalid: `reason`, `error`); its event day, message id,
--      order id, fingerprint (its JSON as parsed: the same however it is
--      formatted), the hash of its bytes (what ledger rows written before
--      fingerprints hold), and what a parked row keeps (payload, bounded;
--      headers as JSON, secrets redacted; key, for its DLQ copy);
--   $3 the order lines of the candidates, inbox_batch_line[]: the ordinal
--      of its record, SKU, quantity, whether another candidate names the
--      same (order_id, sku);
--   $4 the partitions it moves, inbox_batch_partition[]: the next offset,
--      the position the consumer last read or wrote (null: none yet), the
--      topic's id (Kafka's; null when the broker did not say);
--   $5 the trace id of the batch's span (null when tracing is off), kept on
--      its parked rows;
--   $6 whether parked records are copied to a DLQ topic (their rows then
--      owe a copy until it is sent).
--
-- 0. Before anything: a partition whose position in the database is behind
--    the one this consumer wrote (`expected`) means the database went back (a
--    restore, a failover to a lagging replica); one an operator set to
--    another offset than this consumer's (`positions set`, either way) is
--    to be read from there. The functions raise (SQLSTATE IX001), so
--    nothing of the batch commits and the consumer reads the partition
--    again from the database's position. A set that commits while this
--    statement runs is caught as the position is written (step 10).
WITH partition_arg AS MATERIALIZED (
    SELECT * FROM UNNEST($4::inbox_batch_partition[])
),
position_check AS MATERIALIZED (
    SELECT CASE WHEN p.moved_by_operator
                THEN inbox_position_moved(n.topic, n.kafka_partition, p.next_offset, n.expected,
                                          n.next_offset)
                ELSE inbox_position_behind(n.topic, n.kafka_partition, p.next_offset, n.expected)
           END
    FROM partition_arg n
    LEFT JOIN inbox_position p
           ON p.consumer = $1 AND p.topic = n.topic AND p.kafka_partition = n.kafka_partition
    WHERE (n.expected IS NOT NULL AND (p.next_offset IS NULL OR p.next_offset < n.expected))
       OR (p.moved_by_operator AND p.next_offset IS DISTINCT FROM n.expected)
),
-- The codes the ledger keeps for the consumer name and the topics
-- (inbox_consumer, inbox_topic; made at their first use). Made in one order
-- whatever the plan: the consumer's first (topic_code reads codes), then the
-- topics' by name. Two lanes' first batches that made them in opposite
-- orders would each hold one uncommitted and wait for the other's: a
-- deadlock.
codes AS MATERIALIZED (
    SELECT coalesce((SELECT code FROM inbox_consumer WHERE name = $1),
                    inbox_consumer_code($1)) AS consumer,
           inbox_today() AS today,
           inbox_write_day('order_reservation') AS reservation_day,
           inbox_write_day('inbox_parked') AS parked_day
),
-- The records, without what only a parked row keeps (read by ordinal
-- there, for the records parked alone).
record AS MATERIALIZED (
    SELECT r.topic, r.kafka_partition, r.kafka_offset, r.kind, r.event_day, r.message_id,
           r.order_id, r.fingerprint, r.byte_hash, r.first_ord, r.reason, r.error,
           r.ordinality AS ord
    FROM UNNEST($2::inbox_batch_record[]) WITH ORDINALITY AS r
    WHERE (SELECT count(*) FROM position_check) = 0
),
line AS MATERIALIZED (
    SELECT l.ordinality AS line_ord, l.record_ord, r.order_id, l.sku, l.quantity, l.shared,
           r.message_id
    FROM UNNEST($3::inbox_batch_line[]) WITH ORDINALITY AS l
    JOIN record r ON r.ord = l.record_ord
),
topic_code AS MATERIALIZED (
    SELECT t.topic,
           coalesce((SELECT code FROM inbox_topic WHERE name = t.topic),
                    inbox_topic_code(t.topic)) AS code
    FROM (SELECT DISTINCT topic FROM record
          WHERE (SELECT consumer FROM codes) IS NOT NULL
          ORDER BY topic) AS t
),
-- 1. The stock row of each SKU the batch names, as the snapshot holds it,
--    read once a SKU: a line whose SKU has none names an unknown SKU, and
--    the version read is compared with the one the lock returns (`moved`).
batch_sku AS MATERIALIZED (
    SELECT DISTINCT sku FROM line
),
sku_seen AS MATERIALIZED (
    SELECT s.sku, s.xmin AS version
    FROM inventory_stock s
    WHERE s.sku = ANY (ARRAY(SELECT sku FROM batch_sku))
),
unknown_sku AS MATERIALIZED (
    SELECT DISTINCT ON (l.record_ord) l.record_ord, l.sku
    FROM line l
    -- Usually every SKU is known, and no line is looked at.
    WHERE (SELECT count(*) FROM sku_seen) < (SELECT count(*) FROM batch_sku)
      AND NOT EXISTS (SELECT FROM sku_seen s WHERE s.sku = l.sku)
    ORDER BY l.record_ord, l.line_ord
),
-- 2. What the ledger holds of the candidates' ids, on any day of the window
--    (its primary key leads with the id): an id is applied once within the
--    window, whatever day its event time names. Today is looked up in full,
--    and yesterday while it is not filtered; a closed day (yesterday or
--    older) only for the ids its filter may hold, or for every id while it
--    has no clean filter laid out in the slots
--    (docs/design.md#the-filter-of-closed-days). A function
--    (inbox_ledger_seen), so that only the partitions of the days looked up
--    are opened, not the whole window's for every batch.
ledger_seen AS MATERIALIZED (
    SELECT DISTINCT ON (s.message_id) s.message_id, s.payload_hash,
           s.topic, s.kafka_partition, s.kafka_offset
    FROM inbox_ledger_seen((SELECT consumer FROM codes),
                           ARRAY(SELECT message_id FROM record WHERE kind = 'candidate')) AS s
    ORDER BY s.message_id, s.event_day
),
-- Each candidate: a duplicate (its id in the ledger with its fingerprint, or
-- a row written before fingerprints with the hash of its bytes), a conflict
-- (with another), else parked for an unknown SKU, else fresh; and the
-- fingerprint the ledger holds, or will hold, for its id.
verdict AS MATERIALIZED (
    SELECT r.ord,
           CASE WHEN s.message_id IS NOT NULL
                     AND s.payload_hash IN (r.fingerprint, r.byte_hash) THEN 'duplicate'
                WHEN s.message_id IS NOT NULL THEN 'conflict'
                WHEN u.record_ord IS NOT NULL THEN 'unknown_sku'
                ELSE 'fresh' END AS verdict,
           coalesce(s.payload_hash, r.fingerprint) AS id_hash,
           -- The ledger row is this very record's (its position): written
           -- by an earlier try of this batch whose answer was lost, or by
           -- an earlier delivery of the record at the same position.
           (s.topic, s.kafka_partition, s.kafka_offset)
               = (t.code, r.kafka_partition, r.kafka_offset) AS same_record
    FROM record r
    JOIN topic_code t ON t.topic = r.topic
    LEFT JOIN ledger_seen s ON s.message_id = r.message_id
    LEFT JOIN unknown_sku u ON u.record_ord = r.ord
    WHERE r.kind = 'candidate'
),
-- A repeat of an id earlier in the statement: a duplicate when its payload
-- is the one of its id, else a conflict. When the earlier record is parked
-- for an unknown SKU, its id is not in the ledger: the same record again is
-- parked alike; another payload is judged as in a later batch, so the
-- statement ends (IX002) and the consumer splits the batch before it.
repeat_verdict AS MATERIALIZED (
    SELECT r.ord, r.first_ord,
           CASE WHEN f.id_hash IN (r.fingerprint, r.byte_hash)
                     AND f.verdict = 'unknown_sku' THEN 'unknown_sku'
                WHEN f.id_hash IN (r.fingerprint, r.byte_hash) THEN 'duplicate'
                WHEN f.verdict = 'unknown_sku' THEN 'split'
                ELSE 'conflict' END AS verdict
    FROM record r
    JOIN verdict f ON f.ord = r.first_ord
    WHERE r.kind = 'repeat'
),
split AS MATERIALIZED (
    SELECT inbox_refuse('IX002', 'a record repeats the id of a record parked in the same batch',
                        min(ord)::text)
    FROM repeat_verdict
    WHERE verdict = 'split'
    HAVING count(*) > 0
),
-- 3. The stock rows of every SKU the fresh events name, locked in SKU
--    order (concurrent batches wait, never deadlock), with the version
--    of each row the lock returned and the stock it holds: the lock is held
--    until the commit, so that is what the allocation counts against.
locked AS MATERIALIZED (
    SELECT s.sku, s.xmin AS version, s.on_hand - s.reserved AS available
    FROM inventory_stock s
    WHERE s.sku IN (SELECT l.sku
                    FROM line l
                    JOIN verdict v ON v.ord = l.record_ord AND v.verdict = 'fresh')
    ORDER BY s.sku
    FOR UPDATE OF s
),
-- Whether a batch wrote one of those stock rows since this statement's
-- snapshot (every batch that writes an order line writes its SKU's row):
-- the lock returned a newer version than the snapshot holds.
moved AS MATERIALIZED (
    SELECT EXISTS (SELECT FROM locked k
                   JOIN sku_seen seen ON seen.sku = k.sku
                   WHERE seen.version <> k.version) AS since_snapshot
),
fresh_order AS MATERIALIZED (
    SELECT DISTINCT l.order_id
    FROM line l
    JOIN verdict v ON v.ord = l.record_ord AND v.verdict = 'fresh'
),
-- 4. What the reservations of the dedup window hold of the fresh events'
--    orders, as of the moment the locks are held. Any line of an (order_id,
--    sku) is written under the lock of its SKU: when no batch wrote those
--    rows since the snapshot, the snapshot holds every line there is;
--    otherwise a function reads them with a snapshot of its own, taken now
--    (inbox_reservations_of), and a line a batch committed while this one
--    waited is seen. Two batches never both take a line for new.
reserved_before AS MATERIALIZED (
    SELECT DISTINCT o.order_id, o.sku
    FROM order_reservation o
    WHERE o.order_id = ANY (ARRAY(SELECT order_id FROM fresh_order))
      AND o.reserved_day >= (SELECT today FROM codes)
                            - (SELECT retention_days FROM inbox_settings)
      AND NOT (SELECT since_snapshot FROM moved)
    UNION ALL
    SELECT o.order_id, o.sku
    FROM inbox_reservations_of(ARRAY(SELECT order_id FROM fresh_order),
                               (SELECT count(*) FROM locked)) AS o
    WHERE (SELECT since_snapshot FROM moved)
),
-- The lines of the fresh events: `known` when the order line has a
-- reservation already, `claimed` when an earlier fresh event of the batch
-- names it too. Only lines `shared` with another event of the batch (two
-- events of one order: rare) are compared.
fresh_line AS MATERIALIZED (
    SELECT l.*,
           EXISTS (SELECT FROM reserved_before o
                   WHERE o.order_id = l.order_id AND o.sku = l.sku) AS known,
           l.shared AND EXISTS (SELECT FROM line e
                                JOIN verdict v ON v.ord = e.record_ord AND v.verdict = 'fresh'
                                WHERE e.shared AND e.order_id = l.order_id AND e.sku = l.sku
                                  AND e.line_ord < l.line_ord)
               AS claimed
    FROM line l
    JOIN verdict v ON v.ord = l.record_ord AND v.verdict = 'fresh'
),
event AS MATERIALIZED (
    SELECT r.*, a.business_duplicate
    FROM (SELECT record_ord, bool_and(known OR claimed) AS business_duplicate
          FROM fresh_line
          GROUP BY record_ord) AS a
    JOIN record r ON r.ord = a.record_ord
    WHERE (SELECT count(*) FROM split) = 0
),
-- 5. The ledger rows of the fresh events. A row that conflicts now was
--    committed by a concurrent transaction after this statement's snapshot.
ledger AS (
    INSERT INTO processed_inbox (message_id, kafka_offset, payload_hash, processed_at,
                                 event_day, kafka_partition, status, consumer, topic,
                                 aggregate_id)
    SELECT e.message_id, e.kafka_offset, e.fingerprint, clock_timestamp(),
           e.event_day, e.kafka_partition,
           CASE WHEN e.business_duplicate THEN 'd' ELSE 'p' END::"char",
           (SELECT consumer FROM codes), t.code, e.order_id
    FROM event e
    JOIN topic_code t ON t.topic = e.topic
    ORDER BY e.message_id
    ON CONFLICT (message_id, consumer, event_day) DO NOTHING
    RETURNING message_id
),
-- The fresh events' lines not reserved before nor by an earlier fresh event
-- of the batch.
new_line AS MATERIALIZED (
    SELECT a.*
    FROM fresh_line a
    WHERE NOT a.known AND NOT a.claimed
      AND (SELECT count(*) FROM split) = 0
),
-- 6. Each SKU's demand: the sum of the batch's new lines, against its stock
--    as the lock returned it (step 3; not read again). One grouping of the
--    two sets, not a join: the planner cannot size them and would compare
--    every line's SKU with every locked one.
stock AS MATERIALIZED (
    SELECT sku, max(available) AS available, sum(quantity) AS demand
    FROM (SELECT sku, available, NULL::integer AS quantity FROM locked
          UNION ALL
          SELECT sku, NULL, quantity FROM new_line) AS held_or_wanted
    GROUP BY sku
    HAVING count(available) > 0 AND count(quantity) > 0
),
-- 7. Where a SKU's stock covers all of the batch's new lines (the usual
--    case) they are all reserved; where it does not, first come, first
--    served. (A SKU deleted since step 1 has no stock: its lines are
--    rejected.)
short_sku AS MATERIALIZED (
    SELECT sku, available FROM stock WHERE demand > available
),
rationed AS MATERIALIZED (
    SELECT f.line_ord, f.fits
    FROM (SELECT array_agg(n.line_ord ORDER BY n.line_ord) AS line_ords,
                 inbox_first_come(s.available, array_agg(n.quantity ORDER BY n.line_ord)) AS fits
          FROM new_line n
          JOIN short_sku s ON s.sku = n.sku
          -- Usually no SKU is short, and no line is looked at.
          WHERE EXISTS (SELECT FROM short_sku)
          GROUP BY s.sku, s.available) AS per_sku
    CROSS JOIN LATERAL UNNEST(per_sku.line_ords, per_sku.fits) AS f(line_ord, fits)
),
reservation AS (
    INSERT INTO order_reservation (message_id, reserved_day, status, quantity, order_id, sku)
    SELECT n.message_id, (SELECT reservation_day FROM codes),
           CASE WHEN r.fits IS FALSE OR n.sku NOT IN (SELECT sku FROM stock) THEN 'rejected'
                ELSE 'reserved' END::inbox_line_status,
           n.quantity, n.order_id, n.sku
    FROM new_line n
    LEFT JOIN rationed r ON r.line_ord = n.line_ord
    ORDER BY n.order_id, n.sku
    RETURNING sku, quantity, status
),
-- 8. Only the lines reserved now move stock: ONE aggregated UPDATE per SKU
--    of a line written now, rejected lines' too (see `moved`).
stock_update AS (
    UPDATE inventory_stock AS s
    SET reserved = s.reserved + d.quantity,
        updated_at = now()
    FROM (SELECT sku, coalesce(sum(quantity) FILTER (WHERE status = 'reserved'), 0)
          FROM reservation
          GROUP BY sku) AS d(sku, quantity)
    WHERE s.sku = d.sku
    RETURNING s.sku
),
-- A ledger row written by a concurrent transaction since this statement's
-- snapshot (the same event, read by two members during a rebalance): the
-- statement ends (IX003) and runs again with a snapshot that shows it, so
-- that the outcome is the one of the two batches applied one after the
-- other.
raced AS MATERIALIZED (
    SELECT inbox_refuse('IX003', 'a concurrent batch wrote what this batch read', NULL)
    WHERE (SELECT count(*) FROM ledger) < (SELECT count(*) FROM event)
),
-- 9.
to_park AS MATERIALIZED (
    SELECT r.ord, r.reason, r.error
    FROM record r
    WHERE r.kind = 'parked'
    UNION ALL
    SELECT v.ord, 'unknown_sku', format('sku "%s" is not in inventory_stock', u.sku)
    FROM (SELECT ord, ord AS first_ord, verdict FROM verdict
          UNION ALL
          SELECT ord, first_ord, verdict FROM repeat_verdict) AS v
    JOIN unknown_sku u ON u.record_ord = v.first_ord
    WHERE v.verdict = 'unknown_sku'
    UNION ALL
    SELECT v.ord, 'event_id_conflict',
           format('message id %s was seen with a different payload', r.message_id)
    FROM (SELECT ord, verdict FROM verdict
          UNION ALL
          SELECT ord, verdict FROM repeat_verdict) AS v
    JOIN record r ON r.ord = v.ord
    WHERE v.verdict = 'conflict'
),
-- The records to park with their positions, before the look-up below: a
-- condition on the records alone would be run on every record of the batch.
park_row AS MATERIALIZED (
    SELECT p.ord, p.reason, p.error, r.topic, r.kafka_partition, r.kafka_offset, r.message_id
    FROM to_park p
    JOIN record r ON r.ord = p.ord
),
parked AS (
    INSERT INTO inbox_parked (parked_day, consumer, topic, kafka_partition, kafka_offset,
                              message_id, reason, error, payload, headers, trace_id,
                              record_key, dlq_sent_at)
    SELECT (SELECT parked_day FROM codes), $1, p.topic, p.kafka_partition, p.kafka_offset,
           p.message_id,
           p.reason, p.error, (($2::inbox_batch_record[])[p.ord::int]).payload,
           ((($2::inbox_batch_record[])[p.ord::int]).headers)::jsonb,
           $5::text, (($2::inbox_batch_record[])[p.ord::int]).record_key,
           -- No DLQ: no copy is owed.
           CASE WHEN $6::boolean THEN NULL ELSE now() END
    FROM park_row p
    WHERE (SELECT count(*) FROM split) = 0
      -- Parked on an earlier day (a redelivery after midnight). Looked up
      -- by a function, run only for the records parked: a subquery would
      -- put every day of parked rows kept (30 by default) in the plan, each
      -- opened for every batch.
      AND inbox_parked_id($1, p.topic, p.kafka_partition, p.kafka_offset) IS NULL
    ORDER BY p.topic, p.kafka_partition, p.kafka_offset
    ON CONFLICT (consumer, topic, kafka_partition, kafka_offset, parked_day) DO NOTHING
    RETURNING id, topic, kafka_partition, kafka_offset
),
-- 10. The row written is the newest version of the position, whatever
--     this statement's snapshot held: an operator's set that committed
--     since (while this batch waited on a stock row's lock) is seen here,
--     and the statement refuses (IX001) rather than write over it.
next_position AS (
    INSERT INTO inbox_position AS p (consumer, topic, kafka_partition, next_offset, topic_id,
                                     applied_through)
    SELECT $1, n.topic, n.kafka_partition, n.next_offset, n.topic_id, n.next_offset
    FROM partition_arg n
    CROSS JOIN (SELECT count(*) FROM stock_update) AS stock_done
    CROSS JOIN (SELECT count(*) FROM parked) AS parked_done
    CROSS JOIN (SELECT count(*) FROM raced) AS race_checked
    WHERE (SELECT count(*) FROM split) = 0
    ON CONFLICT (consumer, topic, kafka_partition) DO UPDATE
        -- Forward only, unless the position was written for the topic's
        -- earlier life (deleted and created again since); a position of
        -- no known topic takes this one's.
        SET next_offset =
                CASE WHEN p.moved_by_operator
                     THEN inbox_position_moved(p.topic, p.kafka_partition, p.next_offset,
                                               (SELECT a.expected FROM partition_arg a
                                                WHERE (a.topic, a.kafka_partition)
                                                    = (EXCLUDED.topic, EXCLUDED.kafka_partition)),
                                               EXCLUDED.next_offset)
                     WHEN p.topic_id <> EXCLUDED.topic_id THEN EXCLUDED.next_offset
                     ELSE greatest(p.next_offset, EXCLUDED.next_offset) END,
            applied_through =
                CASE WHEN p.topic_id <> EXCLUDED.topic_id THEN EXCLUDED.next_offset
                     ELSE greatest(p.applied_through, EXCLUDED.next_offset) END,
            topic_id = coalesce(EXCLUDED.topic_id, p.topic_id),
            moved_by_operator = false,
            updated_at = now()
        WHERE p.moved_by_operator
           OR p.next_offset < EXCLUDED.next_offset
           OR (EXCLUDED.topic_id IS NOT NULL AND p.topic_id IS DISTINCT FROM EXCLUDED.topic_id)
    RETURNING 1
)
-- What the batch did: the ordinals of the fresh events (and of the business
-- duplicates among them), the duplicates whose ledger row is the record's
-- own (its position), the order lines reserved and rejected, and every
-- parked record with its reason, its row and whether it was parked now (not
-- by an earlier delivery). Everything else is a duplicate.
SELECT (SELECT coalesce(array_agg(ord ORDER BY ord), '{}') FROM event) AS fresh,
       (SELECT coalesce(array_agg(ord ORDER BY ord), '{}') FROM event
        WHERE business_duplicate) AS business_duplicates,
       (SELECT coalesce(array_agg(ord ORDER BY ord), '{}') FROM verdict
        WHERE verdict = 'duplicate' AND same_record) AS same_record_duplicates,
       (SELECT count(*) FROM reservation WHERE status = 'reserved') AS lines_reserved,
       (SELECT count(*) FROM reservation WHERE status = 'rejected') AS lines_rejected,
       coalesce(p.ords, '{}') AS parked_ords,
       coalesce(p.reasons, '{}') AS parked_reasons,
       coalesce(p.errors, '{}') AS parked_errors,
       coalesce(p.newly, '{}') AS parked_newly,
       coalesce(p.ids, '{}') AS parked_ids,
       (SELECT count(*) FROM next_position) AS positions_moved
FROM (SELECT array_agg(r.ord ORDER BY r.ord) AS ords,
             array_agg(r.reason ORDER BY r.ord) AS reasons,
             array_agg(r.error ORDER BY r.ord) AS errors,
             array_agg(n.kafka_offset IS NOT NULL ORDER BY r.ord) AS newly,
             array_agg(coalesce(n.id, inbox_parked_id($1, r.topic, r.kafka_partition,
                                                      r.kafka_offset))
                       ORDER BY r.ord) AS ids
      FROM park_row r
      LEFT JOIN parked n ON (n.topic, n.kafka_partition, n.kafka_offset)
                          = (r.topic, r.kafka_partition, r.kafka_offset)) AS p
