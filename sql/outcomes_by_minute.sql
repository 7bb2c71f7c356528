-- Events per minute by outcome over the last hour, as the consumer's
-- members counted them after each batch's commit (the console's chart;
-- the ring of migrations/20261207000001): at most 240 rows read by the
-- primary key, whatever the traffic. A member killed between two flushes
-- loses up to UPKEEP seconds of its counts; replays by an operator are not
-- counted. $1: consumer.
SELECT minute, outcome, events
FROM inbox_outcome_minute
WHERE consumer = $1
  AND minute >= date_trunc('minute', now()) - interval '59 minutes'
ORDER BY minute, outcome
