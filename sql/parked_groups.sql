-- Parked records of a consumer counted by reason and day (UTC), newest
-- day first: the console's groups. An index-only scan of
-- inbox_parked_consumer_idx (consumer, reason, parked_at): the day is
-- parked_at's UTC date, which is parked_day (the partition key is set from
-- the same clock), so no heap page is read.
SELECT reason, (parked_at AT TIME ZONE 'UTC')::date AS day, count(*) AS records
FROM inbox_parked
WHERE consumer = $1
GROUP BY 1, 2
ORDER BY 2 DESC, 1
