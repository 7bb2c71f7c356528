-- History for `make bench-scale` (docs/design.md#storage): :events events
-- of the consumer :'consumer' spread over the :days days before today, each
-- with a ledger row and :lines reservation lines, written set-based in
-- chunks of a million events (no Kafka), in the order production writes
-- them (random message ids; order ids in sequence), so that the indexes
-- are as full, and as fragmented, as a month of traffic leaves them.
-- Run by psql as the owner: psql -v events=N -v days=D -v lines=L -v consumer=NAME
\set ON_ERROR_STOP on
SET synchronous_commit = off;
SELECT inbox_create_partitions(inbox_today() - :days, inbox_today());
SELECT inbox_consumer_code(:'consumer') AS consumer_code \gset
SELECT inbox_topic_code('history') AS topic_code \gset
SELECT set_config('scale.events', :'events', false),
       set_config('scale.days', :'days', false),
       set_config('scale.lines', :'lines', false),
       set_config('scale.consumer', :'consumer_code', false),
       set_config('scale.topic', :'topic_code', false);
DO $$
DECLARE
    events bigint := current_setting('scale.events')::bigint;
    days integer := current_setting('scale.days')::integer;
    lines integer := current_setting('scale.lines')::integer;
    consumer smallint := current_setting('scale.consumer')::smallint;
    topic smallint := current_setting('scale.topic')::smallint;
    per_day bigint := events / days;
    chunk constant bigint := 1000000;
    day date;
    first bigint;
BEGIN
    FOR d IN 1..days LOOP
        day := inbox_today() - d;
        first := 0;
        WHILE first < per_day LOOP
            WITH event AS MATERIALIZED (
                SELECT g, gen_random_uuid() AS message_id,
                       'H' || to_char(day, 'YYYYMMDD') || '-' || g AS order_id,
                       day + (g * 86400 / per_day) * interval '1 second' AS at
                FROM generate_series(first, least(first + chunk, per_day) - 1) AS g
            ), ledger AS (
                INSERT INTO processed_inbox (message_id, kafka_offset, payload_hash, processed_at,
                                             event_day, kafka_partition, status, consumer, topic,
                                             aggregate_id)
                SELECT message_id, g / 12, hashtextextended(order_id, 0), at, day, (g % 12)::int,
                       'p', consumer, topic, order_id
                FROM event
            )
            INSERT INTO order_reservation (created_at, message_id, reserved_day, status,
                                           quantity, order_id, sku)
            SELECT e.at, e.message_id, day, 'reserved', (1 + (e.g + l) % 3)::smallint,
                   e.order_id, 'LG-SKU-' || lpad(((e.g * 7 + l * 131) % 1000)::text, 5, '0')
            FROM event e
            CROSS JOIN generate_series(1, lines) AS l;
            COMMIT;
            first := first + chunk;
        END LOOP;
    END LOOP;
END
$$;
-- As a month of traffic leaves them: visible to all, frozen, analysed (a
-- freshly loaded table's first autovacuum would otherwise run during the
-- measurement).
VACUUM (FREEZE, ANALYZE) processed_inbox;
VACUUM (FREEZE, ANALYZE) order_reservation;
