-- The batch function (20261207002001) with its step 4, the reservations
-- of the window its fresh orders hold, through inbox_reservations_seen
-- (20261207004001): a closed day of order_reservation is looked up only for
-- the orders its filter may hold, as a closed day of the ledger is for ids.
-- Nothing else changes.

CREATE OR REPLACE FUNCTION inbox_apply_batch(
    -- The ledger's consumer.
    batch_consumer text,
    -- The records in poll order (migrations/20261206000005): candidates,
    -- repeats of an id earlier in the batch, and invalid records to park.
    records inbox_batch_record[],
    -- The order lines of the candidates.
    lines inbox_batch_line[],
    -- The partitions the batch moves.
    partitions inbox_batch_partition[],
    -- The trace id of the batch's span, kept on its parked rows.
    batch_trace_id text,
    -- Whether a parked row owes a copy to the DLQ topic.
    dlq_copies boolean,
    -- What it did, by the records' ordinals (1-based): the fresh events,
    -- the business duplicates among them, the duplicates whose ledger row
    -- is the record's own (its position); the order lines reserved and
    -- rejected; each parked record with its reason, error, whether it was
    -- parked now (not by an earlier delivery) and its row; the positions
    -- written. Every other valid record is a duplicate.
    OUT fresh bigint[],
    OUT business_duplicates bigint[],
    OUT same_record_duplicates bigint[],
    OUT lines_reserved bigint,
    OUT lines_rejected bigint,
    OUT parked_ords bigint[],
    OUT parked_reasons text[],
    OUT parked_errors text[],
    OUT parked_newly boolean[],
    OUT parked_ids bigint[],
    OUT positions_moved bigint)
LANGUAGE plpgsql
SET search_path = public, pg_temp
AS $$
DECLARE
    consumer_code smallint;
    topic_names text[];
    topic_codes smallint[];
    batch_skus text[];
    -- By record ordinal: its verdict ('fresh', 'duplicate', 'conflict',
    -- 'unknown_sku', 'parked'), the fingerprint its id has in the ledger
    -- (or will have), whether the ledger row is this very record's, and
    -- the first SKU it names that inventory_stock does not hold.
    verdict text[];
    id_hash bigint[];
    same_record boolean[];
    unknown_sku text[];
    -- The stock rows locked (of every SKU the candidates name), in SKU
    -- order, with the stock they hold.
    locked_skus text[];
    locked_available bigint[];
    -- The (order, sku) lines reserved before, within the window.
    known_orders text[];
    known_skus text[];
    -- By line ordinal: the fresh events' lines that reserve nothing
    -- (null: none).
    old_lines bigint[];
    -- The first day of the dedup window; the first day of reservations
    -- that may hold a row (inbox_reservation_start); the day's partition a
    -- step writes (today's, or the newest made).
    window_from date;
    reservations_from date;
    write_day date;
    -- Each step's time, when asked (`inbox-loadgen profile`: the setting
    -- inbox.step_times = on); null, and each mark a no-op, otherwise.
    step_times jsonb := CASE WHEN current_setting('inbox.step_times', true) = 'on'
                             THEN jsonb_build_object('mark', clock_timestamp(),
                                                     'steps', '[]'::jsonb) END;
BEGIN
    -- 0. A partition whose position in the database is behind the one this
    --    consumer wrote (`expected`): the database went back (a restore, a
    --    failover to a lagging replica). One an operator set to another
    --    offset (`positions set`, either way): it is to be read from there.
    --    Both raise IX001; nothing of the batch commits and the consumer
    --    reads the partition again from the database's position. A set that
    --    commits while the batch runs is caught as the position is written
    --    (step 8).
    PERFORM CASE WHEN p.moved_by_operator
                 THEN inbox_position_moved(n.topic, n.kafka_partition, p.next_offset, n.expected,
                                           n.next_offset)
                 ELSE inbox_position_behind(n.topic, n.kafka_partition, p.next_offset, n.expected)
            END
    FROM unnest(partitions) AS n
    LEFT JOIN inbox_position p
           ON p.consumer = batch_consumer AND p.topic = n.topic
          AND p.kafka_partition = n.kafka_partition
    WHERE (n.expected IS NOT NULL AND (p.next_offset IS NULL OR p.next_offset < n.expected))
       OR (p.moved_by_operator AND p.next_offset IS DISTINCT FROM n.expected);
    step_times := inbox_step_time(step_times, 'position_check');

    -- The codes the ledger keeps for the consumer and the topics, made at
    -- their first use, always in one order (the consumer's, then the
    -- topics' by name): two first batches making them in opposite orders
    -- would each wait for the other's.
    SELECT (SELECT c.code FROM inbox_consumer c WHERE c.name = batch_consumer),
           coalesce(array_agg(n.topic ORDER BY n.topic), '{}'),
           coalesce(array_agg(t.code ORDER BY n.topic), '{}')
    INTO consumer_code, topic_names, topic_codes
    FROM (SELECT DISTINCT r.topic FROM unnest(records) AS r) AS n
    LEFT JOIN inbox_topic t ON t.name = n.topic;
    IF consumer_code IS NULL OR array_position(topic_codes, NULL) IS NOT NULL THEN
        consumer_code := coalesce(consumer_code, inbox_consumer_code(batch_consumer));
        FOR i IN 1 .. cardinality(topic_names) LOOP
            topic_codes[i] := coalesce(topic_codes[i], inbox_topic_code(topic_names[i]));
        END LOOP;
    END IF;
    step_times := inbox_step_time(step_times, 'codes');

    -- 1. The stock rows of every SKU the candidates name, locked in SKU
    --    order, with the stock each holds: the lock is held until the
    --    commit, so that is what the allocation counts against. A SKU
    --    whose row the lock did not find is unknown: the first of each
    --    record is kept; usually every SKU is found, and no line is looked
    --    at again.
    SELECT array_agg(DISTINCT l.sku) INTO batch_skus FROM unnest(lines) AS l;
    SELECT array_agg(k.sku ORDER BY k.sku), array_agg(k.available ORDER BY k.sku)
    INTO locked_skus, locked_available
    FROM (SELECT s.sku, s.on_hand - s.reserved AS available
          FROM inventory_stock s
          WHERE s.sku = ANY (batch_skus)
          ORDER BY s.sku
          FOR UPDATE OF s) AS k;
    step_times := inbox_step_time(step_times, 'locked');
    IF coalesce(cardinality(locked_skus), 0) < coalesce(cardinality(batch_skus), 0) THEN
        SELECT array_agg(m.sku ORDER BY r.ordinality) INTO unknown_sku
        FROM generate_series(1, cardinality(records)) AS r(ordinality)
        LEFT JOIN (SELECT DISTINCT ON (l.record_ord) l.record_ord, l.sku
                   FROM unnest(lines) WITH ORDINALITY AS l
                   WHERE NOT (l.sku = ANY (coalesce(locked_skus, '{}')))
                   ORDER BY l.record_ord, l.ordinality) AS m
               ON m.record_ord = r.ordinality;
        step_times := inbox_step_time(step_times, 'unknown_sku');
    END IF;

    -- 2. Each candidate against what the ledger holds of its id on any day
    --    of the window (inbox_ledger_seen: today in full, a closed day
    --    through its filter): a duplicate (its id there with its
    --    fingerprint, or a row written before fingerprints with the hash of
    --    its bytes), a conflict (with another), else parked for an unknown
    --    SKU, else fresh.
    SELECT array_agg(CASE WHEN r.kind <> 'candidate' THEN r.kind
                          WHEN s.message_id IS NOT NULL
                               AND s.payload_hash IN (r.fingerprint, r.byte_hash) THEN 'duplicate'
                          WHEN s.message_id IS NOT NULL THEN 'conflict'
                          WHEN unknown_sku[r.ordinality] IS NOT NULL THEN 'unknown_sku'
                          ELSE 'fresh' END ORDER BY r.ordinality),
           array_agg(coalesce(s.payload_hash, r.fingerprint) ORDER BY r.ordinality),
           array_agg((s.topic, s.kafka_partition, s.kafka_offset)
                         = (t.code, r.kafka_partition, r.kafka_offset) ORDER BY r.ordinality)
    INTO verdict, id_hash, same_record
    FROM unnest(records) WITH ORDINALITY AS r
    JOIN unnest(topic_names, topic_codes) AS t(topic, code) ON t.topic = r.topic
    LEFT JOIN (SELECT DISTINCT ON (x.message_id) x.*
               FROM inbox_ledger_seen(consumer_code,
                                      ARRAY(SELECT c.message_id FROM unnest(records) AS c
                                            WHERE c.kind = 'candidate')) AS x
               ORDER BY x.message_id, x.event_day) AS s
           ON s.message_id = r.message_id AND r.kind = 'candidate';
    step_times := inbox_step_time(step_times, 'ledger_seen');

    --    A repeat of an id earlier in the batch: a duplicate when its
    --    payload is the one of its id, else a conflict. When the earlier
    --    record is parked for an unknown SKU, its id is not in the ledger:
    --    the same record again is parked alike; another payload is judged
    --    as in a later batch, so the batch is refused (IX002) and the
    --    consumer splits it before that record.
    IF 'repeat' = ANY (verdict) THEN
        SELECT array_agg(CASE WHEN r.kind <> 'repeat' THEN verdict[r.ordinality]
                              WHEN id_hash[r.first_ord] IN (r.fingerprint, r.byte_hash)
                                   AND verdict[r.first_ord] = 'unknown_sku' THEN 'unknown_sku'
                              WHEN id_hash[r.first_ord] IN (r.fingerprint, r.byte_hash)
                                  THEN 'duplicate'
                              WHEN verdict[r.first_ord] = 'unknown_sku' THEN 'split'
                              ELSE 'conflict' END ORDER BY r.ordinality)
        INTO verdict
        FROM unnest(records) WITH ORDINALITY AS r;
        IF 'split' = ANY (verdict) THEN
            RAISE EXCEPTION 'a record repeats the id of a record parked in the same batch'
                USING ERRCODE = 'IX002', DETAIL = array_position(verdict, 'split')::text;
        END IF;
        step_times := inbox_step_time(step_times, 'repeat_verdict');
    END IF;

    IF 'fresh' = ANY (verdict) THEN
        -- 3. (The stock rows were locked at step 1.)
        -- 4. What the reservations of the window hold of the fresh events'
        --    orders, read now that their SKUs are locked: a line reserved
        --    before, or earlier in the batch, reserves nothing; an event all
        --    of whose lines are is a business duplicate. Only the days of
        --    the window that may hold a reservation are looked up, a closed
        --    day's only for the orders its filter may hold
        --    (inbox_reservations_seen).
        SELECT inbox_today() - s.retention_days, r.first_day
        INTO window_from, reservations_from
        FROM inbox_settings s
        LEFT JOIN inbox_reservation_start r ON true;
        SELECT array_agg(o.order_id), array_agg(o.sku)
        INTO known_orders, known_skus
        FROM (SELECT DISTINCT o.order_id, o.sku
              FROM inbox_reservations_seen(
                       ARRAY(SELECT r.order_id FROM unnest(records) WITH ORDINALITY AS r
                             WHERE verdict[r.ordinality] = 'fresh'),
                       greatest(window_from, reservations_from)) AS o) AS o;
        step_times := inbox_step_time(step_times, 'reserved_before');

        -- The fresh events' lines that reserve nothing: reserved before
        -- (`known`) or by an earlier fresh event of the batch (`claimed`).
        -- Usually no fresh order was reserved before and no line is shared
        -- with another event: then every fresh line is new, and none is
        -- compared.
        fresh := array_positions(verdict, 'fresh');
        IF known_orders IS NOT NULL
           OR EXISTS (SELECT FROM unnest(lines) AS l
                      WHERE l.shared AND verdict[l.record_ord] = 'fresh') THEN
            WITH fresh_line AS (
                SELECT l.ordinality AS line_ord, l.record_ord, l.sku, l.shared,
                       r.order_id,
                       coalesce((r.order_id, l.sku) IN (SELECT * FROM unnest(known_orders, known_skus)),
                                false) AS known
                FROM unnest(lines) WITH ORDINALITY AS l
                JOIN unnest(records) WITH ORDINALITY AS r
                  ON r.ordinality = l.record_ord
                WHERE verdict[l.record_ord] = 'fresh'
            ),
            -- `claimed`: an earlier fresh event of the batch names the same
            -- order line. Only lines `shared` with another event (two events of
            -- one order: rare) are compared.
            judged AS (
                SELECT f.*,
                       f.shared AND EXISTS (SELECT FROM fresh_line e
                                            WHERE e.shared AND e.order_id = f.order_id
                                              AND e.sku = f.sku AND e.line_ord < f.line_ord)
                           AS claimed
                FROM fresh_line f
            ),
            event AS (
                SELECT record_ord, bool_and(known OR claimed) AS business_duplicate
                FROM judged
                GROUP BY record_ord
            )
            SELECT (SELECT array_agg(record_ord ORDER BY record_ord) FROM event
                    WHERE business_duplicate),
                   (SELECT array_agg(line_ord ORDER BY line_ord) FROM judged
                    WHERE known OR claimed)
            INTO business_duplicates, old_lines;
        END IF;
        step_times := inbox_step_time(step_times, 'fresh_line');

        -- 5. The fresh events' ledger rows. One that is there now was
        --    committed by a concurrent batch since step 2: its key refuses
        --    the row (23505 on the day's partition), nothing of the batch
        --    commits, and the consumer runs it again at once, to find the
        --    row a duplicate (a plain insert: no row is looked up first,
        --    as ON CONFLICT would for each).
        INSERT INTO processed_inbox (message_id, kafka_offset, payload_hash, processed_at,
                                     event_day, kafka_partition, status, consumer, topic,
                                     aggregate_id)
        SELECT r.message_id, r.kafka_offset, r.fingerprint, clock_timestamp(), r.event_day,
               r.kafka_partition,
               CASE WHEN r.ordinality = ANY (business_duplicates) THEN 'd' ELSE 'p' END::"char",
               consumer_code, t.code, r.order_id
        FROM unnest(records) WITH ORDINALITY AS r
        JOIN unnest(topic_names, topic_codes) AS t(topic, code) ON t.topic = r.topic
        WHERE verdict[r.ordinality] = 'fresh'
        ORDER BY r.message_id;
        step_times := inbox_step_time(step_times, 'ledger');
    END IF;

    IF cardinality(fresh) > coalesce(cardinality(business_duplicates), 0) THEN
        -- 6. The new lines (the fresh events' lines but the old ones)
        --    reserved first come, first served in batch order against each
        --    SKU's stock as the lock returned it: all of a SKU's when its
        --    stock covers them (the usual case).
        -- 7. ONE aggregated UPDATE per SKU of a line written now (rejected
        --    lines' too: every batch that writes an order line writes its
        --    SKU's row).
        write_day := inbox_write_day('order_reservation');
        IF write_day < reservations_from THEN
            UPDATE inbox_reservation_start SET first_day = write_day
            WHERE first_day > write_day;
        END IF;
        -- Each line's record taken by its ordinal, not joined: a join's
        -- plan depends on how many lines the planner guesses are new.
        WITH new_line AS (
            SELECT l.ordinality AS line_ord, l.sku, l.quantity, r.message_id, r.order_id
            FROM unnest(lines) WITH ORDINALITY AS l
            CROSS JOIN LATERAL (SELECT (records[l.record_ord]).message_id,
                                       (records[l.record_ord]).order_id) AS r
            WHERE verdict[l.record_ord] = 'fresh'
              AND (old_lines IS NULL OR NOT l.ordinality = ANY (old_lines))
        ),
        -- One grouping of the held and the wanted, not a join: the planner
        -- cannot size them and would compare every line with every SKU.
        stock AS (
            SELECT sku, max(available) AS available, sum(quantity) AS demand
            FROM (SELECT h.sku, h.available, NULL::integer AS quantity
                  FROM unnest(locked_skus, locked_available) AS h(sku, available)
                  UNION ALL
                  SELECT n.sku, NULL, n.quantity FROM new_line n) AS held_or_wanted
            GROUP BY sku
            HAVING count(available) > 0 AND count(quantity) > 0
        ),
        -- The lines of the SKUs whose stock does not cover them (usually
        -- none), in batch order, each with whether it fits.
        rationed AS (
            SELECT f.line_ord, f.fits
            FROM (SELECT n.sku, array_agg(n.line_ord ORDER BY n.line_ord) AS line_ords,
                         array_agg(n.quantity ORDER BY n.line_ord) AS quantities
                  FROM new_line n
                  WHERE n.sku = ANY (ARRAY(SELECT s.sku FROM stock s
                                           WHERE s.demand > s.available))
                  GROUP BY n.sku) AS short
            JOIN stock s ON s.sku = short.sku
            CROSS JOIN LATERAL unnest(short.line_ords,
                                      inbox_first_come(s.available, short.quantities))
                AS f(line_ord, fits)
        ),
        reservation AS (
            INSERT INTO order_reservation (message_id, reserved_day, status, quantity, order_id,
                                           sku)
            SELECT n.message_id, write_day,
                   CASE WHEN f.fits IS FALSE OR n.sku NOT IN (SELECT sku FROM stock)
                        THEN 'rejected' ELSE 'reserved' END::inbox_line_status,
                   n.quantity, n.order_id, n.sku
            FROM new_line n
            LEFT JOIN rationed f ON f.line_ord = n.line_ord
            ORDER BY n.order_id, n.sku
            RETURNING sku, quantity, status
        ),
        stock_update AS (
            UPDATE inventory_stock AS s
            SET reserved = s.reserved + d.quantity,
                updated_at = now()
            FROM (SELECT sku, coalesce(sum(quantity) FILTER (WHERE status = 'reserved'), 0)
                  FROM reservation
                  GROUP BY sku) AS d(sku, quantity)
            WHERE s.sku = d.sku
        )
        SELECT count(*) FILTER (WHERE status = 'reserved'),
               count(*) FILTER (WHERE status = 'rejected')
        INTO lines_reserved, lines_rejected
        FROM reservation;
        step_times := inbox_step_time(step_times, 'reservation');
    END IF;

    -- 8. The records parked (invalid, an unknown SKU, an id conflict) in
    --    the same transaction, idempotent on their position; one parked on
    --    an earlier day (a redelivery after midnight) keeps that row.
    IF 'parked' = ANY (verdict) OR 'unknown_sku' = ANY (verdict)
       OR 'conflict' = ANY (verdict) THEN
        write_day := inbox_write_day('inbox_parked');
        WITH to_park AS (
            SELECT r.*,
                   CASE WHEN r.kind = 'parked' THEN r.reason
                        WHEN verdict[r.ordinality] = 'unknown_sku' THEN 'unknown_sku'
                        ELSE 'event_id_conflict' END AS park_reason,
                   CASE WHEN r.kind = 'parked' THEN r.error
                        WHEN verdict[r.ordinality] = 'unknown_sku'
                            THEN format('sku "%s" is not in inventory_stock',
                                        unknown_sku[CASE WHEN r.kind = 'repeat' THEN r.first_ord
                                                         ELSE r.ordinality END])
                        ELSE format('message id %s was seen with a different payload',
                                    r.message_id) END AS park_error
            FROM unnest(records) WITH ORDINALITY AS r
            WHERE verdict[r.ordinality] IN ('parked', 'unknown_sku', 'conflict')
        ),
        parked AS (
            INSERT INTO inbox_parked (parked_day, consumer, topic, kafka_partition, kafka_offset,
                                      message_id, reason, error, payload, headers, trace_id,
                                      record_key, dlq_sent_at)
            SELECT write_day, batch_consumer, p.topic, p.kafka_partition,
                   p.kafka_offset, p.message_id, p.park_reason, p.park_error, p.payload,
                   p.headers::jsonb, batch_trace_id, p.record_key,
                   -- No DLQ: no copy is owed.
                   CASE WHEN dlq_copies THEN NULL ELSE now() END
            FROM to_park p
            WHERE inbox_parked_id(batch_consumer, p.topic, p.kafka_partition,
                                  p.kafka_offset) IS NULL
            ORDER BY p.topic, p.kafka_partition, p.kafka_offset
            ON CONFLICT (consumer, topic, kafka_partition, kafka_offset, parked_day) DO NOTHING
            RETURNING id, topic, kafka_partition, kafka_offset
        )
        SELECT array_agg(p.ordinality ORDER BY p.ordinality),
               array_agg(p.park_reason ORDER BY p.ordinality),
               array_agg(p.park_error ORDER BY p.ordinality),
               array_agg(n.kafka_offset IS NOT NULL ORDER BY p.ordinality),
               array_agg(coalesce(n.id, inbox_parked_id(batch_consumer, p.topic,
                                                        p.kafka_partition, p.kafka_offset))
                         ORDER BY p.ordinality)
        INTO parked_ords, parked_reasons, parked_errors, parked_newly, parked_ids
        FROM to_park p
        LEFT JOIN parked n ON (n.topic, n.kafka_partition, n.kafka_offset)
                            = (p.topic, p.kafka_partition, p.kafka_offset);
        step_times := inbox_step_time(step_times, 'parked');
    END IF;

    -- 9. The partitions' next offsets, last. The row written is the newest
    --    version of the position: an operator's set that committed since
    --    step 0 (while the batch waited on a stock row's lock) is seen
    --    here, and the batch is refused (IX001) rather than write over it.
    INSERT INTO inbox_position AS p (consumer, topic, kafka_partition, next_offset, topic_id,
                                     applied_through)
    SELECT batch_consumer, n.topic, n.kafka_partition, n.next_offset, n.topic_id, n.next_offset
    FROM unnest(partitions) AS n
    ON CONFLICT (consumer, topic, kafka_partition) DO UPDATE
        -- Forward only, unless the position was written for the topic's
        -- earlier life (deleted and created again since); a position of
        -- no known topic takes this one's.
        SET next_offset =
                CASE WHEN p.moved_by_operator
                     THEN inbox_position_moved(p.topic, p.kafka_partition, p.next_offset,
                                               (SELECT a.expected FROM unnest(partitions) AS a
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
           OR (EXCLUDED.topic_id IS NOT NULL AND p.topic_id IS DISTINCT FROM EXCLUDED.topic_id);
    GET DIAGNOSTICS positions_moved = ROW_COUNT;
    step_times := inbox_step_time(step_times, 'next_position');

    SELECT array_agg(r.ordinality ORDER BY r.ordinality) INTO same_record_duplicates
    FROM generate_series(1, cardinality(records)) AS r(ordinality)
    WHERE verdict[r.ordinality] = 'duplicate' AND same_record[r.ordinality];

    fresh := coalesce(fresh, '{}');
    business_duplicates := coalesce(business_duplicates, '{}');
    same_record_duplicates := coalesce(same_record_duplicates, '{}');
    lines_reserved := coalesce(lines_reserved, 0);
    lines_rejected := coalesce(lines_rejected, 0);
    parked_ords := coalesce(parked_ords, '{}');
    parked_reasons := coalesce(parked_reasons, '{}');
    parked_errors := coalesce(parked_errors, '{}');
    parked_newly := coalesce(parked_newly, '{}');
    parked_ids := coalesce(parked_ids, '{}');
    step_times := inbox_step_time(step_times, 'result');
    IF step_times IS NOT NULL THEN
        PERFORM set_config('inbox.step_times_of_batch', (step_times -> 'steps')::text, true);
    END IF;
END;
$$;
