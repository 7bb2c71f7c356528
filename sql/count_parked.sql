-- How many parked records of a consumer `parked list` chooses from ($2: of
-- these reasons, every code when it lists all; $3: since a time, the
-- epoch for all), counted up to $4: the count its first records are
-- shown against, at a bounded cost however many a broken producer parked.
-- An index-only scan of inbox_parked_consumer_idx (consumer, reason,
-- parked_at), every condition an index condition: a count of a rare
-- reason reads only its own entries.
SELECT count(*) AS records
FROM (
    SELECT 1
    FROM inbox_parked
    WHERE consumer = $1
      AND reason = ANY ($2::text[])
      AND parked_at >= $3
    LIMIT $4
) AS chosen
