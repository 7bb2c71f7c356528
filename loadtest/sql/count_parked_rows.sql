-- Parked rows of one consumer and topic, all reasons: half of the drain
-- wait's measure of what the consumer has taken.
-- $1: consumer, $2: topic.
SELECT count(*) AS parked FROM inbox_parked WHERE consumer = $1 AND topic = $2
