--
-- PostgreSQL database dump
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: inbox_batch_line; Type: TYPE; Schema: public; Owner: -
--

CREATE TYPE public.inbox_batch_line AS (
	record_ord integer,
	sku text,
	quantity integer,
	shared boolean
);

--
-- Name: inbox_batch_partition; Type: TYPE; Schema: public; Owner: -
--

CREATE TYPE public.inbox_batch_partition AS (
	topic text,
	kafka_partition integer,
	next_offset bigint,
	expected bigint,
	topic_id uuid
);

--
-- Name: inbox_batch_record; Type: TYPE; Schema: public; Owner: -
--

CREATE TYPE public.inbox_batch_record AS (
	topic text,
	kafka_partition integer,
	kafka_offset bigint,
	kind text,
	event_day date,
	message_id uuid,
	order_id text,
	fingerprint bigint,
	byte_hash bigint,
	first_ord integer,
	reason text,
	error text,
	payload bytea,
	headers text,
	record_key bytea
);

--
-- Name: inbox_line_status; Type: TYPE; Schema: public; Owner: -
--

CREATE TYPE public.inbox_line_status AS ENUM (
    'reserved',
    'rejected'
);

--
-- Name: inbox_apply_batch(text, public.inbox_batch_record[], public.inbox_batch_line[], public.inbox_batch_partition[], text, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_apply_batch(batch_consumer text, records public.inbox_batch_record[], lines public.inbox_batch_line[], partitions public.inbox_batch_partition[], batch_trace_id text, dlq_copies boolean, OUT fresh bigint[], OUT business_duplicates bigint[], OUT same_record_duplicates bigint[], OUT lines_reserved bigint, OUT lines_rejected bigint, OUT parked_ords bigint[], OUT parked_reasons text[], OUT parked_errors text[], OUT parked_newly boolean[], OUT parked_ids bigint[], OUT positions_moved bigint) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_temp'
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

--
-- Name: inbox_clock_day(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_clock_day() RETURNS date
    LANGUAGE sql
    AS $$ SELECT (clock_timestamp() AT TIME ZONE 'UTC')::date $$;

--
-- Name: inbox_consumer_code(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_consumer_code(consumer_name text) RETURNS smallint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    found smallint;
BEGIN
    SELECT code INTO found FROM inbox_consumer WHERE name = consumer_name;
    IF found IS NULL THEN
        INSERT INTO inbox_consumer (name) VALUES (consumer_name) ON CONFLICT (name) DO NOTHING;
        SELECT code INTO STRICT found FROM inbox_consumer WHERE name = consumer_name;
    END IF;
    RETURN found;
END;
$$;

--
-- Name: inbox_create_partitions(date, date); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_create_partitions(first_day date, last_day date) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    day date := first_day;
    created integer := 0;
    parent text;
    name text;
BEGIN
    WHILE day <= last_day LOOP
        FOREACH parent IN ARRAY ARRAY['processed_inbox', 'order_reservation', 'inbox_parked'] LOOP
            CONTINUE WHEN parent = 'inbox_parked' AND day < inbox_today();
            name := parent || '_p' || to_char(day, 'YYYYMMDD');
            IF to_regclass(name) IS NULL THEN
                IF parent = 'processed_inbox' THEN
                    INSERT INTO inbox_ledger_filter (event_day) VALUES (day)
                    ON CONFLICT (event_day) DO NOTHING;
                END IF;
                EXECUTE format(
                    'CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                    name, parent, day, day + 1);
                created := created + 1;
            END IF;
        END LOOP;
        day := day + 1;
    END LOOP;
    RETURN created;
END;
$$;

--
-- Name: inbox_create_window(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_create_window(OUT locked boolean, OUT created integer) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $$
DECLARE
    settings inbox_settings;
BEGIN
    created := 0;
    locked := pg_try_advisory_xact_lock(hashtext('inventory-inbox:maintain'));
    IF NOT locked THEN
        RETURN;
    END IF;
    SELECT * INTO STRICT settings FROM inbox_settings;
    created := inbox_create_partitions(inbox_today() - settings.retention_days,
                                       inbox_today() + settings.premake_days);
END;
$$;

--
-- Name: inbox_drop_expired(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_drop_expired(OUT locked boolean, OUT dropped integer) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $$
DECLARE
    settings inbox_settings;
    day date;
    name text;
BEGIN
    dropped := 0;
    locked := pg_try_advisory_xact_lock(hashtext('inventory-inbox:maintain'));
    IF NOT locked THEN
        RETURN;
    END IF;
    SELECT * INTO STRICT settings FROM inbox_settings;
    FOR day IN SELECT d FROM inbox_window_days() AS d
               WHERE d < inbox_today() - settings.retention_days LOOP
        EXECUTE format('DROP TABLE %I', 'processed_inbox_p' || to_char(day, 'YYYYMMDD'));
        DELETE FROM inbox_ledger_filter f WHERE f.event_day = day;
        dropped := dropped + 1;
    END LOOP;
    -- Rows of days whose partition is gone otherwise.
    DELETE FROM inbox_ledger_filter f
    WHERE f.event_day < inbox_today() - settings.retention_days
      AND f.event_day NOT IN (SELECT d FROM inbox_window_days() AS d);
    FOR day IN SELECT d FROM inbox_reservation_days() AS d
               WHERE d < inbox_today() - settings.reservation_retention_days LOOP
        name := 'order_reservation_p' || to_char(day, 'YYYYMMDD');
        IF settings.reservation_expiry = 'detach' THEN
            EXECUTE format('ALTER TABLE order_reservation DETACH PARTITION %I', name);
        ELSE
            EXECUTE format('DROP TABLE %I', name);
        END IF;
        dropped := dropped + 1;
    END LOOP;
END;
$$;

--
-- Name: inbox_filter_mask(bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_filter_mask(h2 bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN ((((((((1)::bigint << ((h2 & (63)::bigint))::integer) | ((1)::bigint << (((h2 >> 6) & (63)::bigint))::integer)) | ((1)::bigint << (((h2 >> 12) & (63)::bigint))::integer)) | ((1)::bigint << (((h2 >> 18) & (63)::bigint))::integer)) | ((1)::bigint << (((h2 >> 24) & (63)::bigint))::integer)) | ((1)::bigint << (((h2 >> 30) & (63)::bigint))::integer)) | ((1)::bigint << (((h2 >> 36) & (63)::bigint))::integer));

--
-- Name: inbox_first_come(bigint, integer[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_first_come(available bigint, quantities integer[]) RETURNS boolean[]
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
DECLARE
    fits boolean[] := '{}';
    quantity integer;
BEGIN
    FOREACH quantity IN ARRAY quantities LOOP
        IF quantity <= available THEN
            available := available - quantity;
            fits := fits || true;
        ELSE
            fits := fits || false;
        END IF;
    END LOOP;
    RETURN fits;
END;
$$;

--
-- Name: inbox_ledger_closed_days(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_ledger_closed_days() RETURNS TABLE(event_day date, word_offset integer, width integer, filtered boolean)
    LANGUAGE sql STABLE
    AS $$
    SELECT d.event_day, l.word_offset, l.width,
           coalesce(f.built_writes = f.late_writes AND l.built_at = f.built_at, false)
    FROM inbox_window_days() AS d(event_day)
    LEFT JOIN inbox_ledger_filter f ON f.event_day = d.event_day
    LEFT JOIN (SELECT u.* FROM inbox_ledger_filter_layout AS layout,
                      unnest(layout.days, layout.built_at, layout.offsets, layout.widths)
                      AS u(event_day, built_at, word_offset, width)) AS l
           ON l.event_day = d.event_day
    WHERE d.event_day < inbox_today()
      AND (f.built_writes IS NULL OR f.built_writes <> f.late_writes OR f.ids > 0)
$$;

--
-- Name: inbox_ledger_filter_chunks(date, integer, bytea[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_ledger_filter_chunks(day date, first integer, bits bytea[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
    IF EXISTS (SELECT FROM unnest(bits) AS b
               WHERE b IS NULL OR length(b) NOT BETWEEN 8 AND 3968 OR length(b) % 8 <> 0) THEN
        RAISE EXCEPTION 'a ledger filter chunk is 1 to 496 words of 8 bytes';
    END IF;
    INSERT INTO inbox_ledger_filter_chunk AS c (event_day, chunk, bits)
    SELECT day, first + (b.ord - 1)::integer, b.bits
    FROM unnest(bits) WITH ORDINALITY AS b(bits, ord)
    ON CONFLICT (event_day, chunk) DO UPDATE SET bits = EXCLUDED.bits;
END;
$$;

--
-- Name: inbox_ledger_filter_close(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_ledger_filter_close() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    today date;
    closed integer;
    xid xid8;
BEGIN
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RETURN 0;
    END IF;
    today := inbox_clock_day();
    IF NOT EXISTS (SELECT FROM inbox_ledger_filter f
                   WHERE f.closed_xid IS NULL AND f.event_day < today) THEN
        RETURN 0;
    END IF;
    xid := pg_current_xact_id();
    UPDATE inbox_ledger_filter f
    SET closed_xid = xid
    WHERE f.closed_xid IS NULL AND f.event_day < today;
    GET DIAGNOSTICS closed = ROW_COUNT;
    RETURN closed;
END;
$$;

--
-- Name: inbox_ledger_filter_layout_publish(integer, bigint, date[], timestamp with time zone[], integer[], integer[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_ledger_filter_layout_publish(generation integer, slots bigint, days date[], built_at timestamp with time zone[], offsets integer[], widths integer[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    row_words integer := coalesce((SELECT sum(w) FROM unnest(widths) AS w), 0);
BEGIN
    IF cardinality(days) > 0 AND (SELECT count(*) FROM inbox_ledger_filter_slot s
        WHERE s.generation = inbox_ledger_filter_layout_publish.generation
          AND s.slot BETWEEN 0 AND slots - 1 AND cardinality(s.words) = row_words) <> slots THEN
        RAISE EXCEPTION 'the layout % misses slots', generation;
    END IF;
    INSERT INTO inbox_ledger_filter_layout AS l
           (one, generation, slots, days, built_at, offsets, widths)
    VALUES (true, generation, slots, days, built_at, offsets, widths)
    ON CONFLICT (one) DO UPDATE
    SET generation = EXCLUDED.generation, slots = EXCLUDED.slots, days = EXCLUDED.days,
        built_at = EXCLUDED.built_at, offsets = EXCLUDED.offsets, widths = EXCLUDED.widths;
    DELETE FROM inbox_ledger_filter_slot s
    WHERE s.generation <> inbox_ledger_filter_layout_publish.generation;
END;
$$;

--
-- Name: inbox_ledger_filter_may_hold(date, uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_ledger_filter_may_hold(day date, id uuid) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT s.words[d.word_offset + ((h.h / l.slots) % d.width)::integer + 1] & h.mask = h.mask
    FROM inbox_ledger_closed_days() d
    CROSS JOIN inbox_ledger_filter_layout l
    CROSS JOIN LATERAL (SELECT uuid_hash_extended(id, 0) & 2147483647 AS h,
                               inbox_filter_mask(uuid_hash_extended(id, 1)) AS mask) AS h
    JOIN inbox_ledger_filter_slot s ON s.generation = l.generation AND s.slot = h.h % l.slots
    WHERE d.event_day = day AND d.filtered
$$;

--
-- Name: inbox_ledger_filter_publish(date, bigint, bigint, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_ledger_filter_publish(day date, built_writes bigint, ids bigint, orders bigint, words bigint) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    chunk_count integer := ((words + 495) / 496)::integer;
BEGIN
    DELETE FROM inbox_ledger_filter_chunk c WHERE c.event_day = day AND c.chunk >= chunk_count;
    IF (SELECT coalesce(sum(length(c.bits)), 0) FROM inbox_ledger_filter_chunk c
        WHERE c.event_day = day AND c.chunk BETWEEN 0 AND chunk_count - 1) <> words * 8 THEN
        RAISE EXCEPTION 'the filter of % misses words', day;
    END IF;
    UPDATE inbox_ledger_filter f
    SET built_writes = inbox_ledger_filter_publish.built_writes,
        ids = inbox_ledger_filter_publish.ids,
        orders = inbox_ledger_filter_publish.orders,
        chunks = chunk_count,
        words = inbox_ledger_filter_publish.words,
        built_at = clock_timestamp()
    WHERE f.event_day = day;
END;
$$;

--
-- Name: inbox_ledger_filter_slots(integer, integer, integer, bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_ledger_filter_slots(generation integer, first integer, row_words integer, words bigint[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
    IF row_words < 1 OR cardinality(inbox_ledger_filter_slots.words) % row_words <> 0 THEN
        RAISE EXCEPTION 'slot rows of % words from % words',
            row_words, cardinality(inbox_ledger_filter_slots.words);
    END IF;
    INSERT INTO inbox_ledger_filter_slot AS s (generation, slot, words)
    SELECT inbox_ledger_filter_slots.generation, first + n,
           inbox_ledger_filter_slots.words[n * row_words + 1 : (n + 1) * row_words]
    FROM generate_series(0, cardinality(inbox_ledger_filter_slots.words) / row_words - 1) AS n
    ON CONFLICT ON CONSTRAINT inbox_ledger_filter_slot_pkey
    DO UPDATE SET words = EXCLUDED.words;
END;
$$;

--
-- Name: inbox_ledger_late_write(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_ledger_late_write() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    today date := inbox_clock_day();
BEGIN
    UPDATE inbox_ledger_filter f SET late_writes = f.late_writes + late.rows
    FROM (SELECT event_day, count(*) AS rows FROM written
          WHERE event_day < today GROUP BY event_day) AS late
    WHERE f.event_day = late.event_day;
    RETURN NULL;
END;
$$;

--
-- Name: inbox_ledger_seen(smallint, uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_ledger_seen(consumer_code smallint, ids uuid[]) RETURNS TABLE(message_id uuid, payload_hash bigint, topic smallint, kafka_partition integer, kafka_offset bigint, event_day date)
    LANGUAGE plpgsql STABLE ROWS 10
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    today date := inbox_today();
    -- The first day looked up in full: yesterday while it is not filtered.
    full_from date;
    -- The days before yesterday that are not filtered, looked up in full.
    stale date[];
    -- The filtered closed days and where their words are in the slots.
    filtered date[];
    word_offsets integer[];
    widths integer[];
    layout inbox_ledger_filter_layout;
    hit_ids uuid[];
    hit_days date[];
    first_hit date;
    last_hit date;
BEGIN
    SELECT CASE WHEN bool_or(c.event_day = today - 1 AND NOT c.filtered)
                THEN today - 1 ELSE today END,
           array_agg(c.event_day ORDER BY c.event_day)
               FILTER (WHERE NOT c.filtered AND c.event_day < today - 1),
           array_agg(c.event_day ORDER BY c.event_day) FILTER (WHERE c.filtered),
           array_agg(c.word_offset ORDER BY c.event_day) FILTER (WHERE c.filtered),
           array_agg(c.width ORDER BY c.event_day) FILTER (WHERE c.filtered)
    INTO full_from, stale, filtered, word_offsets, widths
    FROM inbox_ledger_closed_days() AS c;

    RETURN QUERY
    SELECT p.message_id, p.payload_hash, p.topic, p.kafka_partition, p.kafka_offset,
           p.event_day
    FROM processed_inbox p
    WHERE p.message_id = ANY (ids)
      AND p.consumer = consumer_code
      AND p.event_day >= full_from;

    IF stale IS NOT NULL THEN
        RETURN QUERY
        SELECT p.message_id, p.payload_hash, p.topic, p.kafka_partition, p.kafka_offset,
               p.event_day
        FROM processed_inbox p
        WHERE p.message_id = ANY (ids)
          AND p.consumer = consumer_code
          AND p.event_day = ANY (stale)
          -- What the partitions are pruned by (not by `= ANY`).
          AND p.event_day BETWEEN stale[1] AND today - 2;
    END IF;

    IF filtered IS NULL THEN
        RETURN;
    END IF;
    -- The ids a filtered day may hold, with that day: each id's slot row
    -- read once, one 64-bit word a day. Each id hashed once (OFFSET 0 keeps
    -- the hashes from being computed again for each day tested).
    SELECT * INTO layout FROM inbox_ledger_filter_layout;
    SELECT array_agg(i.id), array_agg(d.event_day), min(d.event_day), max(d.event_day)
    INTO hit_ids, hit_days, first_hit, last_hit
    FROM (SELECT i.id, i.h % layout.slots AS slot, i.h / layout.slots AS rest,
                 inbox_filter_mask(uuid_hash_extended(i.id, 1)) AS mask
          FROM (SELECT id, uuid_hash_extended(id, 0) & 2147483647 AS h
                FROM unnest(ids) AS id) AS i
          OFFSET 0) AS i
    JOIN inbox_ledger_filter_slot s
      ON s.generation = layout.generation AND s.slot = i.slot
    CROSS JOIN unnest(filtered, word_offsets, widths) AS d(event_day, word_offset, width)
    WHERE s.words[d.word_offset + (i.rest % d.width)::integer + 1] & i.mask = i.mask;
    IF hit_ids IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.message_id, x.payload_hash, x.topic, x.kafka_partition, x.kafka_offset,
           x.event_day
    FROM unnest(hit_ids, hit_days) AS o(message_id, event_day)
    JOIN processed_inbox x ON x.message_id = o.message_id AND x.event_day = o.event_day
    WHERE x.consumer = consumer_code
      AND x.event_day BETWEEN first_hit AND last_hit;
END;
$$;

--
-- Name: inbox_maintenance_begun(text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_maintenance_begun(by_whom text, kept integer) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    run bigint;
BEGIN
    INSERT INTO inbox_maintenance_run (started_by) VALUES (by_whom) RETURNING id INTO run;
    DELETE FROM inbox_maintenance_run WHERE id <= run - kept;
    RETURN run;
END;
$$;

--
-- Name: inbox_maintenance_ended(bigint, boolean, integer, integer, integer, integer, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_maintenance_ended(run bigint, held boolean, made integer, gone integer, parked_gone integer, cleared integer, failure text) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
    UPDATE inbox_maintenance_run
    SET finished_at = clock_timestamp(), locked = held, created = made, dropped = gone,
        parked_deleted = parked_gone, payloads_cleared = cleared, error = failure
    WHERE id = run AND finished_at IS NULL;
$$;

--
-- Name: inbox_parked_days(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_parked_days() RETURNS SETOF date
    LANGUAGE sql STABLE
    AS $$
    SELECT d FROM inbox_partition_days('inbox_parked') AS d
$$;

--
-- Name: inbox_parked_id(text, text, integer, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_parked_id(p_consumer text, p_topic text, p_partition integer, p_offset bigint) RETURNS bigint
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN (SELECT min(x.id) FROM inbox_parked x
            WHERE x.consumer = p_consumer AND x.topic = p_topic
              AND x.kafka_partition = p_partition AND x.kafka_offset = p_offset);
END
$$;

--
-- Name: inbox_partition_days(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_partition_days(parent text) RETURNS SETOF date
    LANGUAGE sql STABLE
    AS $_$
    SELECT substr(c.relname, length(parent) + 3)::date
    FROM pg_inherits i
    CROSS JOIN LATERAL (SELECT relname FROM pg_class WHERE oid = i.inhrelid OFFSET 0) AS c
    WHERE i.inhparent = parent::regclass
      AND c.relname ~ ('^' || parent || '_p[0-9]{8}$')
    ORDER BY 1
$_$;

--
-- Name: inbox_position_behind(text, integer, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_position_behind(p_topic text, p_partition integer, p_position bigint, p_expected bigint) RETURNS integer
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'the database''s position of %/% is % but this consumer wrote %: the database went back',
        p_topic, p_partition, coalesce(p_position::text, 'none'), p_expected
        USING ERRCODE = 'IX001';
END
$$;

--
-- Name: inbox_position_moved(text, integer, bigint, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_position_moved(p_topic text, p_partition integer, p_position bigint, p_expected bigint, p_next bigint) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF p_position IS DISTINCT FROM p_expected THEN
        RAISE EXCEPTION 'an operator set the position of %/% to % since this consumer read or wrote %: the batch is not applied, and the partition is read from there',
            p_topic, p_partition, p_position, coalesce(p_expected::text, 'none')
            USING ERRCODE = 'IX001';
    END IF;
    RETURN greatest(p_position, p_next);
END
$$;

--
-- Name: inbox_prune_parked(integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_prune_parked(max_rows integer, OUT deleted integer, OUT cleared integer) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $$
DECLARE
    settings inbox_settings;
    day date;
    name text;
    rows bigint;
BEGIN
    deleted := 0;
    cleared := 0;
    IF NOT pg_try_advisory_xact_lock(hashtext('inventory-inbox:maintain')) THEN
        RETURN;
    END IF;
    SELECT * INTO STRICT settings FROM inbox_settings;
    FOR day IN SELECT d FROM inbox_parked_days() AS d
               WHERE d < inbox_today() - settings.parked_retention_days LOOP
        name := 'inbox_parked_p' || to_char(day, 'YYYYMMDD');
        EXECUTE format('SELECT count(*) FROM %I', name) INTO rows;
        EXECUTE format('DROP TABLE %I', name);
        deleted := deleted + rows::integer;
    END LOOP;
    IF settings.parked_payload_days > 0 THEN
        UPDATE inbox_parked SET payload = NULL
        WHERE (id, parked_day) IN (
            SELECT id, parked_day FROM inbox_parked
            WHERE payload IS NOT NULL
              AND parked_at < now() - make_interval(days => settings.parked_payload_days)
            ORDER BY id
            LIMIT greatest(max_rows, 1));
        GET DIAGNOSTICS cleared = ROW_COUNT;
    END IF;
END;
$$;

--
-- Name: inbox_refuse(text, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_refuse(code text, message text, detail text) RETURNS integer
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message, DETAIL = coalesce(detail, '');
END
$$;

--
-- Name: inbox_reservation_closed_days(date); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_reservation_closed_days(from_day date) RETURNS TABLE(reserved_day date, word_offset integer, width integer, lookup text)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    today date := inbox_today();
BEGIN
    RETURN QUERY
    SELECT g.day::date, l.word_offset, l.width,
           CASE WHEN f.orders IS NULL OR f.built_writes IS DISTINCT FROM f.late_writes
                    THEN 'full'
                WHEN f.ids = 0 THEN 'none'
                WHEN l.built_at = f.built_at THEN 'filter'
                ELSE 'full' END
    FROM generate_series(greatest(from_day,
                                  today - (SELECT s.retention_days FROM inbox_settings s)),
                         today - 1, interval '1 day') AS g(day)
    LEFT JOIN inbox_ledger_filter f ON f.event_day = g.day::date
    LEFT JOIN (SELECT u.* FROM inbox_ledger_filter_layout AS layout,
                      unnest(layout.days, layout.built_at, layout.offsets, layout.widths)
                      AS u(event_day, built_at, word_offset, width)) AS l
           ON l.event_day = g.day::date
    ORDER BY g.day;
END;
$$;

--
-- Name: inbox_reservation_days(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_reservation_days() RETURNS SETOF date
    LANGUAGE sql STABLE
    AS $$
    SELECT d FROM inbox_partition_days('order_reservation') AS d
$$;

--
-- Name: inbox_reservation_filter_may_hold(date, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_reservation_filter_may_hold(day date, order_id text) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'public', 'pg_temp'
    AS $$
    SELECT s.words[d.word_offset + ((h.h / l.slots) % d.width)::integer + 1] & h.mask = h.mask
    FROM inbox_reservation_closed_days('-infinity') AS d
    CROSS JOIN inbox_ledger_filter_layout l
    CROSS JOIN LATERAL (SELECT hashtextextended(order_id, 0) & 2147483647 AS h,
                               inbox_filter_mask(hashtextextended(order_id, 1)) AS mask) AS h
    JOIN inbox_ledger_filter_slot s ON s.generation = l.generation AND s.slot = h.h % l.slots
    WHERE d.reserved_day = day AND d.lookup = 'filter'
$$;

--
-- Name: inbox_reservation_late_write(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_reservation_late_write() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    today date := inbox_clock_day();
BEGIN
    UPDATE inbox_ledger_filter f SET late_writes = f.late_writes + late.rows
    FROM (SELECT reserved_day, count(*) AS rows FROM written
          WHERE reserved_day < today GROUP BY reserved_day) AS late
    WHERE f.event_day = late.reserved_day;
    RETURN NULL;
END;
$$;

--
-- Name: inbox_reservations_close(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_reservations_close() RETURNS date
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    first date;
    day date;
BEGIN
    PERFORM FROM inbox_reservation_start FOR UPDATE;
    first := least(inbox_today() - 1, (SELECT max(d) FROM inbox_reservation_days() AS d));
    FOR day IN SELECT d FROM inbox_reservation_days() AS d WHERE d < first ORDER BY d LOOP
        IF EXISTS (SELECT FROM order_reservation o WHERE o.reserved_day = day) THEN
            first := day;
            EXIT;
        END IF;
    END LOOP;
    UPDATE inbox_reservation_start SET first_day = first;
    RETURN first;
END;
$$;

--
-- Name: inbox_reservations_of(text[], bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_reservations_of(orders text[], locked bigint) RETURNS TABLE(order_id text, sku text)
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
    RETURN QUERY
    SELECT DISTINCT o.order_id, o.sku
    FROM order_reservation o
    WHERE o.order_id = ANY (orders)
      AND o.reserved_day >= (SELECT inbox_today() - s.retention_days FROM inbox_settings s);
END;
$$;

--
-- Name: inbox_reservations_seen(text[], date); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_reservations_seen(orders text[], from_day date) RETURNS TABLE(order_id text, sku text)
    LANGUAGE plpgsql STABLE ROWS 10
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    today date := inbox_today();
    full_days date[];
    filtered date[];
    word_offsets integer[];
    widths integer[];
    layout inbox_ledger_filter_layout;
    hit_orders text[];
    hit_days date[];
    first_hit date;
    last_hit date;
BEGIN
    IF (SELECT count(*) FROM inbox_ledger_filter f
        WHERE f.event_day >= from_day AND f.event_day < today
          AND f.orders > 0) <= 4 THEN
        RETURN QUERY
        SELECT o.order_id, o.sku
        FROM order_reservation o
        WHERE o.order_id = ANY (orders)
          AND o.reserved_day >= from_day;
        RETURN;
    END IF;

    SELECT array_agg(c.reserved_day ORDER BY c.reserved_day) FILTER (WHERE c.lookup = 'full'),
           array_agg(c.reserved_day ORDER BY c.reserved_day) FILTER (WHERE c.lookup = 'filter'),
           array_agg(c.word_offset ORDER BY c.reserved_day) FILTER (WHERE c.lookup = 'filter'),
           array_agg(c.width ORDER BY c.reserved_day) FILTER (WHERE c.lookup = 'filter')
    INTO full_days, filtered, word_offsets, widths
    FROM inbox_reservation_closed_days(from_day) AS c;

    RETURN QUERY
    SELECT o.order_id, o.sku
    FROM order_reservation o
    WHERE o.order_id = ANY (orders)
      AND o.reserved_day >= greatest(today, from_day);

    IF full_days IS NOT NULL THEN
        RETURN QUERY
        SELECT o.order_id, o.sku
        FROM order_reservation o
        WHERE o.order_id = ANY (orders)
          AND o.reserved_day = ANY (full_days)
          -- What the partitions are pruned by (not by `= ANY`).
          AND o.reserved_day BETWEEN full_days[1] AND today - 1;
    END IF;

    IF filtered IS NULL THEN
        RETURN;
    END IF;
    -- The orders a filtered day may hold, with that day: each order hashed
    -- once, its slot row read once (the slots in one index scan), one
    -- 64-bit word a day tested.
    SELECT * INTO layout FROM inbox_ledger_filter_layout;
    WITH i AS MATERIALIZED (
        SELECT i.id, i.h % layout.slots AS slot, i.h / layout.slots AS rest,
               inbox_filter_mask(hashtextextended(i.id, 1)) AS mask
        FROM (SELECT id, hashtextextended(id, 0) & 2147483647 AS h
              FROM unnest(orders) AS id) AS i
    )
    SELECT array_agg(i.id), array_agg(d.reserved_day), min(d.reserved_day),
           max(d.reserved_day)
    INTO hit_orders, hit_days, first_hit, last_hit
    FROM i
    JOIN inbox_ledger_filter_slot s
      ON s.generation = layout.generation AND s.slot = i.slot
    CROSS JOIN unnest(filtered, word_offsets, widths) AS d(reserved_day, word_offset, width)
    WHERE s.slot = ANY (ARRAY(SELECT i.slot FROM i)::integer[])
      AND s.words[d.word_offset + (i.rest % d.width)::integer + 1] & i.mask = i.mask;
    IF hit_orders IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT o.order_id, o.sku
    FROM unnest(hit_orders, hit_days) AS h(order_id, reserved_day)
    JOIN order_reservation o ON o.order_id = h.order_id AND o.reserved_day = h.reserved_day
    WHERE o.reserved_day BETWEEN first_hit AND last_hit;
END;
$$;

--
-- Name: inbox_step_time(jsonb, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_step_time(times jsonb, step text) RETURNS jsonb
    LANGUAGE sql STRICT
    AS $$
    SELECT jsonb_build_object(
        'mark', clock_timestamp(),
        'steps', (times -> 'steps') || jsonb_build_array(jsonb_build_array(
            step, round(extract(epoch FROM clock_timestamp() - (times ->> 'mark')::timestamptz)
                        * 1000, 4))))
$$;

--
-- Name: inbox_today(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_today() RETURNS date
    LANGUAGE sql STABLE
    AS $$ SELECT (now() AT TIME ZONE 'UTC')::date $$;

--
-- Name: inbox_topic_code(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_topic_code(topic_name text) RETURNS smallint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    found smallint;
BEGIN
    SELECT code INTO found FROM inbox_topic WHERE name = topic_name;
    IF found IS NULL THEN
        INSERT INTO inbox_topic (name) VALUES (topic_name) ON CONFLICT (name) DO NOTHING;
        SELECT code INTO STRICT found FROM inbox_topic WHERE name = topic_name;
    END IF;
    RETURN found;
END;
$$;

--
-- Name: inbox_window_days(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_window_days() RETURNS SETOF date
    LANGUAGE sql STABLE
    AS $$
    SELECT d FROM inbox_partition_days('processed_inbox') AS d
$$;

--
-- Name: inbox_write_day(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.inbox_write_day(parent text) RETURNS date
    LANGUAGE plpgsql STABLE
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    today date := inbox_today();
BEGIN
    IF to_regclass(parent || '_p' || to_char(today, 'YYYYMMDD')) IS NOT NULL THEN
        RETURN today;
    END IF;
    RETURN (SELECT max(d) FROM inbox_partition_days(parent) AS d);
END;
$$;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: inbox_breaker; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox_breaker (
    consumer text NOT NULL,
    opened_at timestamp with time zone NOT NULL,
    reason text NOT NULL,
    resumed_at timestamp with time zone,
    resumed_by text
);

--
-- Name: inbox_compacted; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox_compacted (
    index_name text NOT NULL,
    bytes_before bigint NOT NULL,
    bytes_after bigint NOT NULL,
    compacted_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: inbox_consumer; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox_consumer (
    code smallint NOT NULL,
    name text NOT NULL COLLATE pg_catalog."C"
);

--
-- Name: inbox_consumer_code_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.inbox_consumer ALTER COLUMN code ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.inbox_consumer_code_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: inbox_topic; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox_topic (
    code smallint NOT NULL,
    name text NOT NULL COLLATE pg_catalog."C"
);

--
-- Name: processed_inbox; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.processed_inbox (
    message_id uuid NOT NULL,
    kafka_offset bigint NOT NULL,
    payload_hash bigint NOT NULL,
    processed_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    event_day date NOT NULL,
    kafka_partition integer NOT NULL,
    status "char" NOT NULL,
    consumer smallint NOT NULL,
    topic smallint NOT NULL,
    aggregate_id text NOT NULL COLLATE pg_catalog."C",
    CONSTRAINT processed_inbox_status_check1 CHECK ((status = ANY (ARRAY['p'::"char", 'd'::"char"])))
)
PARTITION BY RANGE (event_day);

--
-- Name: inbox_ledger; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.inbox_ledger AS
 SELECT l.event_day,
    c.name AS consumer,
    l.message_id,
    'OrderPlaced'::text AS event_type,
    l.aggregate_id,
    t.name AS topic,
    l.kafka_partition,
    l.kafka_offset,
        CASE l.status
            WHEN 'p'::"char" THEN 'processed'::text
            ELSE 'business_duplicate'::text
        END AS status,
    l.payload_hash,
    l.processed_at
   FROM ((public.processed_inbox l
     JOIN public.inbox_consumer c ON ((c.code = l.consumer)))
     JOIN public.inbox_topic t ON ((t.code = l.topic)));

--
-- Name: inbox_ledger_filter; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox_ledger_filter (
    event_day date NOT NULL,
    late_writes bigint DEFAULT 0 NOT NULL,
    built_writes bigint,
    ids bigint,
    chunks integer,
    built_at timestamp with time zone,
    closed_xid xid8,
    words bigint,
    orders bigint
);

--
-- Name: inbox_ledger_filter_chunk; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox_ledger_filter_chunk (
    event_day date NOT NULL,
    chunk integer NOT NULL,
    bits bytea NOT NULL
);
ALTER TABLE ONLY public.inbox_ledger_filter_chunk ALTER COLUMN bits SET STORAGE PLAIN;

--
-- Name: inbox_ledger_filter_layout; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox_ledger_filter_layout (
    one boolean DEFAULT true NOT NULL,
    generation integer NOT NULL,
    slots bigint NOT NULL,
    days date[] NOT NULL,
    built_at timestamp with time zone[] NOT NULL,
    offsets integer[] NOT NULL,
    widths integer[] NOT NULL,
    CONSTRAINT inbox_ledger_filter_layout_one_check CHECK (one)
);

--
-- Name: inbox_ledger_filter_slot; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox_ledger_filter_slot (
    generation integer NOT NULL,
    slot integer NOT NULL,
    words bigint[] NOT NULL
);
ALTER TABLE ONLY public.inbox_ledger_filter_slot ALTER COLUMN words SET STORAGE MAIN;

--
-- Name: inbox_maintenance_run; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox_maintenance_run (
    id bigint NOT NULL,
    started_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    started_by text NOT NULL,
    finished_at timestamp with time zone,
    locked boolean,
    created integer,
    dropped integer,
    parked_deleted integer,
    payloads_cleared integer,
    error text
);

--
-- Name: inbox_maintenance_run_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.inbox_maintenance_run ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.inbox_maintenance_run_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: inbox_outcome_minute; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox_outcome_minute (
    consumer text NOT NULL,
    slot smallint NOT NULL,
    outcome text NOT NULL,
    minute timestamp with time zone NOT NULL,
    events bigint NOT NULL,
    CONSTRAINT inbox_outcome_minute_slot_check CHECK (((slot >= 0) AND (slot <= 119)))
);

--
-- Name: inbox_parked; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox_parked (
    id bigint NOT NULL,
    parked_day date NOT NULL,
    consumer text NOT NULL,
    topic text NOT NULL,
    kafka_partition integer NOT NULL,
    kafka_offset bigint NOT NULL,
    message_id uuid,
    reason text NOT NULL,
    error text NOT NULL,
    payload bytea,
    headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    parked_at timestamp with time zone DEFAULT now() NOT NULL,
    replayed_at timestamp with time zone,
    replay_outcome text,
    trace_id text,
    record_key bytea,
    dlq_sent_at timestamp with time zone,
    replays jsonb
)
PARTITION BY RANGE (parked_day);

--
-- Name: inbox_parked_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.inbox_parked_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: inbox_parked_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.inbox_parked_id_seq OWNED BY public.inbox_parked.id;

--
-- Name: inbox_position; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox_position (
    consumer text NOT NULL COLLATE pg_catalog."C",
    topic text NOT NULL COLLATE pg_catalog."C",
    kafka_partition integer NOT NULL,
    next_offset bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    topic_id uuid,
    moved_by_operator boolean DEFAULT false NOT NULL,
    applied_through bigint,
    CONSTRAINT inbox_position_next_offset_check CHECK ((next_offset >= 0))
);

--
-- Name: inbox_reservation_start; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox_reservation_start (
    one boolean DEFAULT true NOT NULL,
    first_day date NOT NULL,
    CONSTRAINT inbox_reservation_start_one_check CHECK (one)
);

--
-- Name: inbox_settings; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox_settings (
    singleton boolean DEFAULT true NOT NULL,
    retention_days integer NOT NULL,
    premake_days integer NOT NULL,
    parked_retention_days integer NOT NULL,
    parked_payload_days integer NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    reservation_retention_days integer DEFAULT 14 NOT NULL,
    reservation_expiry text DEFAULT 'drop'::text NOT NULL,
    CONSTRAINT inbox_settings_parked_payload_days_check CHECK (((parked_payload_days >= 0) AND (parked_payload_days <= 3650))),
    CONSTRAINT inbox_settings_parked_retention_days_check CHECK (((parked_retention_days >= 1) AND (parked_retention_days <= 3650))),
    CONSTRAINT inbox_settings_premake_days_check CHECK (((premake_days >= 1) AND (premake_days <= 30))),
    CONSTRAINT inbox_settings_reservation_expiry_check CHECK ((reservation_expiry = ANY (ARRAY['drop'::text, 'detach'::text]))),
    CONSTRAINT inbox_settings_reservation_retention_days_check CHECK (((reservation_retention_days >= 1) AND (reservation_retention_days <= 3650))),
    CONSTRAINT inbox_settings_retention_days_check CHECK (((retention_days >= 1) AND (retention_days <= 3650))),
    CONSTRAINT inbox_settings_singleton_check CHECK (singleton),
    CONSTRAINT reservations_cover_the_window CHECK ((reservation_retention_days >= retention_days))
);

--
-- Name: inbox_topic_code_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.inbox_topic ALTER COLUMN code ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.inbox_topic_code_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: inventory_stock; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inventory_stock (
    sku text NOT NULL COLLATE pg_catalog."C",
    on_hand bigint NOT NULL,
    reserved bigint DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT inventory_stock_on_hand_check CHECK ((on_hand >= 0)),
    CONSTRAINT inventory_stock_reserved_check CHECK ((reserved >= 0)),
    CONSTRAINT reserved_within_on_hand CHECK ((reserved <= on_hand))
);

--
-- Name: order_reservation; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.order_reservation (
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    message_id uuid NOT NULL,
    reserved_day date NOT NULL,
    status public.inbox_line_status NOT NULL,
    quantity smallint NOT NULL,
    order_id text NOT NULL COLLATE pg_catalog."C",
    sku text NOT NULL COLLATE pg_catalog."C",
    CONSTRAINT order_reservation_quantity_check1 CHECK (((quantity >= 1) AND (quantity <= 10000)))
)
PARTITION BY RANGE (reserved_day);

--
-- Name: inbox_parked id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_parked ALTER COLUMN id SET DEFAULT nextval('public.inbox_parked_id_seq'::regclass);

--
-- Name: inbox_breaker inbox_breaker_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_breaker
    ADD CONSTRAINT inbox_breaker_pkey PRIMARY KEY (consumer);

--
-- Name: inbox_compacted inbox_compacted_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_compacted
    ADD CONSTRAINT inbox_compacted_pkey PRIMARY KEY (index_name);

--
-- Name: inbox_consumer inbox_consumer_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_consumer
    ADD CONSTRAINT inbox_consumer_name_key UNIQUE (name);

--
-- Name: inbox_consumer inbox_consumer_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_consumer
    ADD CONSTRAINT inbox_consumer_pkey PRIMARY KEY (code);

--
-- Name: inbox_ledger_filter_chunk inbox_ledger_filter_chunk_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_ledger_filter_chunk
    ADD CONSTRAINT inbox_ledger_filter_chunk_pkey PRIMARY KEY (event_day, chunk);

--
-- Name: inbox_ledger_filter_layout inbox_ledger_filter_layout_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_ledger_filter_layout
    ADD CONSTRAINT inbox_ledger_filter_layout_pkey PRIMARY KEY (one);

--
-- Name: inbox_ledger_filter inbox_ledger_filter_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_ledger_filter
    ADD CONSTRAINT inbox_ledger_filter_pkey PRIMARY KEY (event_day);

--
-- Name: inbox_ledger_filter_slot inbox_ledger_filter_slot_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_ledger_filter_slot
    ADD CONSTRAINT inbox_ledger_filter_slot_pkey PRIMARY KEY (generation, slot);

--
-- Name: inbox_maintenance_run inbox_maintenance_run_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_maintenance_run
    ADD CONSTRAINT inbox_maintenance_run_pkey PRIMARY KEY (id);

--
-- Name: inbox_outcome_minute inbox_outcome_minute_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_outcome_minute
    ADD CONSTRAINT inbox_outcome_minute_pkey PRIMARY KEY (consumer, slot, outcome);

--
-- Name: inbox_parked inbox_parked_consumer_topic_kafka_partition_kafka_offset_pa_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_parked
    ADD CONSTRAINT inbox_parked_consumer_topic_kafka_partition_kafka_offset_pa_key UNIQUE (consumer, topic, kafka_partition, kafka_offset, parked_day);

--
-- Name: inbox_parked inbox_parked_pkey1; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_parked
    ADD CONSTRAINT inbox_parked_pkey1 PRIMARY KEY (id, parked_day);

--
-- Name: inbox_position inbox_position_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_position
    ADD CONSTRAINT inbox_position_pkey PRIMARY KEY (consumer, topic, kafka_partition);

--
-- Name: inbox_reservation_start inbox_reservation_start_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_reservation_start
    ADD CONSTRAINT inbox_reservation_start_pkey PRIMARY KEY (one);

--
-- Name: inbox_settings inbox_settings_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_settings
    ADD CONSTRAINT inbox_settings_pkey PRIMARY KEY (singleton);

--
-- Name: inbox_topic inbox_topic_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_topic
    ADD CONSTRAINT inbox_topic_name_key UNIQUE (name);

--
-- Name: inbox_topic inbox_topic_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_topic
    ADD CONSTRAINT inbox_topic_pkey PRIMARY KEY (code);

--
-- Name: inventory_stock inventory_stock_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inventory_stock
    ADD CONSTRAINT inventory_stock_pkey PRIMARY KEY (sku);

--
-- Name: processed_inbox processed_inbox_pkey1; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.processed_inbox
    ADD CONSTRAINT processed_inbox_pkey1 PRIMARY KEY (message_id, consumer, event_day);

--
-- Name: inbox_parked_consumer_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX inbox_parked_consumer_idx ON ONLY public.inbox_parked USING btree (consumer, reason, parked_at);

--
-- Name: inbox_parked_dlq_owed_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX inbox_parked_dlq_owed_idx ON ONLY public.inbox_parked USING btree (consumer, topic, kafka_partition, id) WHERE (dlq_sent_at IS NULL);

--
-- Name: inbox_parked_key_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX inbox_parked_key_idx ON ONLY public.inbox_parked USING btree (record_key);

--
-- Name: inbox_parked_message_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX inbox_parked_message_idx ON ONLY public.inbox_parked USING btree (message_id);

--
-- Name: inbox_parked_reason_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX inbox_parked_reason_idx ON ONLY public.inbox_parked USING btree (reason, parked_at);

--
-- Name: order_reservation_order_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX order_reservation_order_idx ON ONLY public.order_reservation USING btree (order_id);

--
-- Name: processed_inbox_business_duplicate_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX processed_inbox_business_duplicate_idx ON ONLY public.processed_inbox USING btree (aggregate_id) WHERE (status = 'd'::"char");

--
-- Name: processed_inbox_offset_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX processed_inbox_offset_idx ON ONLY public.processed_inbox USING brin (kafka_offset int8_minmax_multi_ops) WITH (autosummarize='on');

--
-- Name: processed_inbox inbox_ledger_late_write; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER inbox_ledger_late_write AFTER INSERT ON public.processed_inbox REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION public.inbox_ledger_late_write();

--
-- Name: order_reservation inbox_reservation_late_write; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER inbox_reservation_late_write AFTER INSERT ON public.order_reservation REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION public.inbox_reservation_late_write();

--
-- Name: inbox_ledger_filter_chunk inbox_ledger_filter_chunk_event_day_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox_ledger_filter_chunk
    ADD CONSTRAINT inbox_ledger_filter_chunk_event_day_fkey FOREIGN KEY (event_day) REFERENCES public.inbox_ledger_filter(event_day) ON DELETE CASCADE;

--
-- Name: FUNCTION inbox_apply_batch(batch_consumer text, records public.inbox_batch_record[], lines public.inbox_batch_line[], partitions public.inbox_batch_partition[], batch_trace_id text, dlq_copies boolean, OUT fresh bigint[], OUT business_duplicates bigint[], OUT same_record_duplicates bigint[], OUT lines_reserved bigint, OUT lines_rejected bigint, OUT parked_ords bigint[], OUT parked_reasons text[], OUT parked_errors text[], OUT parked_newly boolean[], OUT parked_ids bigint[], OUT positions_moved bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_apply_batch(batch_consumer text, records public.inbox_batch_record[], lines public.inbox_batch_line[], partitions public.inbox_batch_partition[], batch_trace_id text, dlq_copies boolean, OUT fresh bigint[], OUT business_duplicates bigint[], OUT same_record_duplicates bigint[], OUT lines_reserved bigint, OUT lines_rejected bigint, OUT parked_ords bigint[], OUT parked_reasons text[], OUT parked_errors text[], OUT parked_newly boolean[], OUT parked_ids bigint[], OUT positions_moved bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_apply_batch(batch_consumer text, records public.inbox_batch_record[], lines public.inbox_batch_line[], partitions public.inbox_batch_partition[], batch_trace_id text, dlq_copies boolean, OUT fresh bigint[], OUT business_duplicates bigint[], OUT same_record_duplicates bigint[], OUT lines_reserved bigint, OUT lines_rejected bigint, OUT parked_ords bigint[], OUT parked_reasons text[], OUT parked_errors text[], OUT parked_newly boolean[], OUT parked_ids bigint[], OUT positions_moved bigint) TO inventory_app;

--
-- Name: FUNCTION inbox_clock_day(); Type: ACL; Schema: public; Owner: -
--

GRANT ALL ON FUNCTION public.inbox_clock_day() TO inventory_app;

--
-- Name: FUNCTION inbox_consumer_code(consumer_name text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_consumer_code(consumer_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_consumer_code(consumer_name text) TO inventory_app;

--
-- Name: FUNCTION inbox_create_partitions(first_day date, last_day date); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_create_partitions(first_day date, last_day date) FROM PUBLIC;

--
-- Name: FUNCTION inbox_create_window(OUT locked boolean, OUT created integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_create_window(OUT locked boolean, OUT created integer) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_create_window(OUT locked boolean, OUT created integer) TO inventory_app;

--
-- Name: FUNCTION inbox_drop_expired(OUT locked boolean, OUT dropped integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_drop_expired(OUT locked boolean, OUT dropped integer) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_drop_expired(OUT locked boolean, OUT dropped integer) TO inventory_app;

--
-- Name: FUNCTION inbox_first_come(available bigint, quantities integer[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_first_come(available bigint, quantities integer[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_first_come(available bigint, quantities integer[]) TO inventory_app;

--
-- Name: FUNCTION inbox_ledger_closed_days(); Type: ACL; Schema: public; Owner: -
--

GRANT ALL ON FUNCTION public.inbox_ledger_closed_days() TO inventory_app;

--
-- Name: FUNCTION inbox_ledger_filter_chunks(day date, first integer, bits bytea[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_ledger_filter_chunks(day date, first integer, bits bytea[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_ledger_filter_chunks(day date, first integer, bits bytea[]) TO inventory_app;

--
-- Name: FUNCTION inbox_ledger_filter_close(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_ledger_filter_close() FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_ledger_filter_close() TO inventory_app;

--
-- Name: FUNCTION inbox_ledger_filter_layout_publish(generation integer, slots bigint, days date[], built_at timestamp with time zone[], offsets integer[], widths integer[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_ledger_filter_layout_publish(generation integer, slots bigint, days date[], built_at timestamp with time zone[], offsets integer[], widths integer[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_ledger_filter_layout_publish(generation integer, slots bigint, days date[], built_at timestamp with time zone[], offsets integer[], widths integer[]) TO inventory_app;

--
-- Name: FUNCTION inbox_ledger_filter_publish(day date, built_writes bigint, ids bigint, orders bigint, words bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_ledger_filter_publish(day date, built_writes bigint, ids bigint, orders bigint, words bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_ledger_filter_publish(day date, built_writes bigint, ids bigint, orders bigint, words bigint) TO inventory_app;

--
-- Name: FUNCTION inbox_ledger_filter_slots(generation integer, first integer, row_words integer, words bigint[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_ledger_filter_slots(generation integer, first integer, row_words integer, words bigint[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_ledger_filter_slots(generation integer, first integer, row_words integer, words bigint[]) TO inventory_app;

--
-- Name: FUNCTION inbox_ledger_late_write(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_ledger_late_write() FROM PUBLIC;

--
-- Name: FUNCTION inbox_ledger_seen(consumer_code smallint, ids uuid[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_ledger_seen(consumer_code smallint, ids uuid[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_ledger_seen(consumer_code smallint, ids uuid[]) TO inventory_app;

--
-- Name: FUNCTION inbox_maintenance_begun(by_whom text, kept integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_maintenance_begun(by_whom text, kept integer) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_maintenance_begun(by_whom text, kept integer) TO inventory_app;

--
-- Name: FUNCTION inbox_maintenance_ended(run bigint, held boolean, made integer, gone integer, parked_gone integer, cleared integer, failure text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_maintenance_ended(run bigint, held boolean, made integer, gone integer, parked_gone integer, cleared integer, failure text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_maintenance_ended(run bigint, held boolean, made integer, gone integer, parked_gone integer, cleared integer, failure text) TO inventory_app;

--
-- Name: FUNCTION inbox_parked_days(); Type: ACL; Schema: public; Owner: -
--

GRANT ALL ON FUNCTION public.inbox_parked_days() TO inventory_app;

--
-- Name: FUNCTION inbox_parked_id(p_consumer text, p_topic text, p_partition integer, p_offset bigint); Type: ACL; Schema: public; Owner: -
--

GRANT ALL ON FUNCTION public.inbox_parked_id(p_consumer text, p_topic text, p_partition integer, p_offset bigint) TO inventory_app;

--
-- Name: FUNCTION inbox_partition_days(parent text); Type: ACL; Schema: public; Owner: -
--

GRANT ALL ON FUNCTION public.inbox_partition_days(parent text) TO inventory_app;

--
-- Name: FUNCTION inbox_position_behind(p_topic text, p_partition integer, p_position bigint, p_expected bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_position_behind(p_topic text, p_partition integer, p_position bigint, p_expected bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_position_behind(p_topic text, p_partition integer, p_position bigint, p_expected bigint) TO inventory_app;

--
-- Name: FUNCTION inbox_position_moved(p_topic text, p_partition integer, p_position bigint, p_expected bigint, p_next bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_position_moved(p_topic text, p_partition integer, p_position bigint, p_expected bigint, p_next bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_position_moved(p_topic text, p_partition integer, p_position bigint, p_expected bigint, p_next bigint) TO inventory_app;

--
-- Name: FUNCTION inbox_prune_parked(max_rows integer, OUT deleted integer, OUT cleared integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_prune_parked(max_rows integer, OUT deleted integer, OUT cleared integer) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_prune_parked(max_rows integer, OUT deleted integer, OUT cleared integer) TO inventory_app;

--
-- Name: FUNCTION inbox_refuse(code text, message text, detail text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_refuse(code text, message text, detail text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_refuse(code text, message text, detail text) TO inventory_app;

--
-- Name: FUNCTION inbox_reservation_closed_days(from_day date); Type: ACL; Schema: public; Owner: -
--

GRANT ALL ON FUNCTION public.inbox_reservation_closed_days(from_day date) TO inventory_app;

--
-- Name: FUNCTION inbox_reservation_days(); Type: ACL; Schema: public; Owner: -
--

GRANT ALL ON FUNCTION public.inbox_reservation_days() TO inventory_app;

--
-- Name: FUNCTION inbox_reservation_filter_may_hold(day date, order_id text); Type: ACL; Schema: public; Owner: -
--

GRANT ALL ON FUNCTION public.inbox_reservation_filter_may_hold(day date, order_id text) TO inventory_app;

--
-- Name: FUNCTION inbox_reservation_late_write(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_reservation_late_write() FROM PUBLIC;

--
-- Name: FUNCTION inbox_reservations_close(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_reservations_close() FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_reservations_close() TO inventory_app;

--
-- Name: FUNCTION inbox_reservations_of(orders text[], locked bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_reservations_of(orders text[], locked bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_reservations_of(orders text[], locked bigint) TO inventory_app;

--
-- Name: FUNCTION inbox_reservations_seen(orders text[], from_day date); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_reservations_seen(orders text[], from_day date) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_reservations_seen(orders text[], from_day date) TO inventory_app;

--
-- Name: FUNCTION inbox_step_time(times jsonb, step text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_step_time(times jsonb, step text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_step_time(times jsonb, step text) TO inventory_app;

--
-- Name: FUNCTION inbox_today(); Type: ACL; Schema: public; Owner: -
--

GRANT ALL ON FUNCTION public.inbox_today() TO inventory_app;

--
-- Name: FUNCTION inbox_topic_code(topic_name text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_topic_code(topic_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_topic_code(topic_name text) TO inventory_app;

--
-- Name: FUNCTION inbox_window_days(); Type: ACL; Schema: public; Owner: -
--

GRANT ALL ON FUNCTION public.inbox_window_days() TO inventory_app;

--
-- Name: FUNCTION inbox_write_day(parent text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.inbox_write_day(parent text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.inbox_write_day(parent text) TO inventory_app;

--
-- Name: TABLE inbox_breaker; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.inbox_breaker TO inventory_app;
GRANT SELECT ON TABLE public.inbox_breaker TO inventory_operator;

--
-- Name: TABLE inbox_compacted; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.inbox_compacted TO inventory_app;

--
-- Name: TABLE inbox_consumer; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.inbox_consumer TO inventory_app;
GRANT SELECT ON TABLE public.inbox_consumer TO inventory_operator;

--
-- Name: TABLE inbox_topic; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.inbox_topic TO inventory_app;
GRANT SELECT ON TABLE public.inbox_topic TO inventory_operator;

--
-- Name: TABLE processed_inbox; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.processed_inbox TO inventory_app;
GRANT SELECT ON TABLE public.processed_inbox TO inventory_operator;

--
-- Name: TABLE inbox_ledger; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.inbox_ledger TO inventory_app;

--
-- Name: TABLE inbox_ledger_filter; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.inbox_ledger_filter TO inventory_app;

--
-- Name: TABLE inbox_ledger_filter_chunk; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.inbox_ledger_filter_chunk TO inventory_app;

--
-- Name: TABLE inbox_ledger_filter_layout; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.inbox_ledger_filter_layout TO inventory_app;

--
-- Name: TABLE inbox_ledger_filter_slot; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.inbox_ledger_filter_slot TO inventory_app;

--
-- Name: TABLE inbox_maintenance_run; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.inbox_maintenance_run TO inventory_app;
GRANT SELECT ON TABLE public.inbox_maintenance_run TO inventory_operator;

--
-- Name: TABLE inbox_outcome_minute; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.inbox_outcome_minute TO inventory_app;
GRANT SELECT ON TABLE public.inbox_outcome_minute TO inventory_operator;

--
-- Name: TABLE inbox_parked; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.inbox_parked TO inventory_app;

--
-- Name: COLUMN inbox_parked.id; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(id) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: COLUMN inbox_parked.parked_day; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(parked_day) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: COLUMN inbox_parked.consumer; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(consumer) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: COLUMN inbox_parked.topic; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(topic) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: COLUMN inbox_parked.kafka_partition; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(kafka_partition) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: COLUMN inbox_parked.kafka_offset; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(kafka_offset) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: COLUMN inbox_parked.message_id; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(message_id) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: COLUMN inbox_parked.reason; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(reason) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: COLUMN inbox_parked.error; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(error) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: COLUMN inbox_parked.payload; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(payload) ON TABLE public.inbox_parked TO inventory_parked_reader;

--
-- Name: COLUMN inbox_parked.headers; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(headers) ON TABLE public.inbox_parked TO inventory_parked_reader;

--
-- Name: COLUMN inbox_parked.parked_at; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(parked_at) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: COLUMN inbox_parked.replayed_at; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(replayed_at) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: COLUMN inbox_parked.replay_outcome; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(replay_outcome) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: COLUMN inbox_parked.trace_id; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(trace_id) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: COLUMN inbox_parked.record_key; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(record_key) ON TABLE public.inbox_parked TO inventory_parked_reader;

--
-- Name: COLUMN inbox_parked.dlq_sent_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(dlq_sent_at) ON TABLE public.inbox_parked TO inventory_app;
GRANT SELECT(dlq_sent_at) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: COLUMN inbox_parked.replays; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(replays) ON TABLE public.inbox_parked TO inventory_operator;

--
-- Name: SEQUENCE inbox_parked_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT USAGE ON SEQUENCE public.inbox_parked_id_seq TO inventory_app;

--
-- Name: TABLE inbox_position; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.inbox_position TO inventory_app;
GRANT SELECT ON TABLE public.inbox_position TO inventory_operator;

--
-- Name: COLUMN inbox_position.next_offset; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(next_offset) ON TABLE public.inbox_position TO inventory_app;

--
-- Name: COLUMN inbox_position.updated_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(updated_at) ON TABLE public.inbox_position TO inventory_app;

--
-- Name: COLUMN inbox_position.topic_id; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(topic_id) ON TABLE public.inbox_position TO inventory_app;

--
-- Name: COLUMN inbox_position.moved_by_operator; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(moved_by_operator) ON TABLE public.inbox_position TO inventory_app;

--
-- Name: COLUMN inbox_position.applied_through; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(applied_through) ON TABLE public.inbox_position TO inventory_app;

--
-- Name: TABLE inbox_reservation_start; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.inbox_reservation_start TO inventory_app;
GRANT SELECT ON TABLE public.inbox_reservation_start TO inventory_operator;

--
-- Name: COLUMN inbox_reservation_start.first_day; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(first_day) ON TABLE public.inbox_reservation_start TO inventory_app;

--
-- Name: TABLE inbox_settings; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.inbox_settings TO inventory_app;
GRANT SELECT ON TABLE public.inbox_settings TO inventory_operator;

--
-- Name: TABLE inventory_stock; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,UPDATE ON TABLE public.inventory_stock TO inventory_app;
GRANT SELECT ON TABLE public.inventory_stock TO inventory_operator;

--
-- Name: TABLE order_reservation; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.order_reservation TO inventory_app;
GRANT SELECT ON TABLE public.order_reservation TO inventory_operator;

--
-- PostgreSQL database dump complete
--

