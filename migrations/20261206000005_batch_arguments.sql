-- The batch statement's arguments as one typed row per thing
-- (sql/apply_batch.sql): a record of the batch, an order line of its
-- candidates, a partition it moves. The statement takes an array of each,
-- its fields read by name, instead of one positional array per field.

-- A record of the batch, in poll order.
CREATE TYPE inbox_batch_record AS (
    topic           text,
    kafka_partition integer,
    kafka_offset    bigint,
    -- 'candidate' (valid, in the window, its id first in the statement),
    -- 'repeat' (its id came earlier in the statement) or 'parked'
    -- (invalid: `reason`, `error`).
    kind            text,
    event_day       date,
    message_id      uuid,
    order_id        text,
    -- The event's fingerprint (its JSON as parsed, docs/design.md).
    fingerprint     bigint,
    -- The hash of its bytes, which ledger rows written before fingerprints
    -- hold.
    byte_hash       bigint,
    -- For a repeat: the ordinal of the first record with its id.
    first_ord       integer,
    reason          text,
    error           text,
    -- Kept on a parked row (bounded), headers as JSON with secrets
    -- redacted, the key for the DLQ copy.
    payload         bytea,
    headers         text,
    record_key      bytea
);

-- An order line of a candidate.
CREATE TYPE inbox_batch_line AS (
    -- The ordinal of its record in the statement.
    record_ord integer,
    sku        text,
    quantity   integer,
    -- Whether another candidate of the batch names the same (order, sku).
    shared     boolean
);

-- A partition the batch moves.
CREATE TYPE inbox_batch_partition AS (
    topic           text,
    kafka_partition integer,
    -- The next offset to read once the batch is applied.
    next_offset     bigint,
    -- The position the consumer last read or wrote (null: none yet).
    expected        bigint,
    -- Kafka's id of the topic (null: the broker did not say).
    topic_id        uuid
);
