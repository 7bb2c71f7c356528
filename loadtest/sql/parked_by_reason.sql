-- Parked rows of one consumer and topic, per reason code.
-- $1: consumer, $2: topic.
SELECT reason, count(*) AS parked
FROM inbox_parked
WHERE consumer = $1 AND topic = $2
GROUP BY reason
