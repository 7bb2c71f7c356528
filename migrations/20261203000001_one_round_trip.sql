-- One round trip per batch (SPEC §13): the batch statement (sql/apply_batch.sql)
-- does everything in one statement, which needs a helper for the one step
-- that is not a set operation, and records the consumer's positions.

-- First-come allocation of one SKU: given the stock available and the
-- quantities of the SKU's new order lines in batch (offset) order, whether
-- each line is reserved. A line that does not fit is rejected and reserves
-- nothing, and a later, smaller line may still fit: a sequential rule, so a
-- loop over one SKU's lines rather than a window function. The batch
-- statement only calls it for SKUs whose lines together exceed the stock.
CREATE FUNCTION inbox_first_come(available bigint, quantities integer[])
RETURNS boolean[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
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

-- The next offset to read, per (consumer, topic, partition), written by each
-- batch in its own transaction (SPEC §13): the database is the authority on
-- positions as it is on duplicates. The batch statement only moves a
-- position forward; an operator moves it anywhere (`inventory-inbox
-- positions set`, as the owner role).
CREATE TABLE inbox_position (
    consumer        text        COLLATE "C" NOT NULL,
    topic           text        COLLATE "C" NOT NULL,
    kafka_partition integer     NOT NULL,
    next_offset     bigint      NOT NULL CHECK (next_offset >= 0),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, topic, kafka_partition)
);

GRANT SELECT, INSERT, UPDATE (next_offset, updated_at) ON inbox_position TO inventory_app;
REVOKE EXECUTE ON FUNCTION inbox_first_come(bigint, integer[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox_first_come(bigint, integer[]) TO inventory_app;
