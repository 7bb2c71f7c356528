-- Deletes up to $1 parked rows past their retention and clears up to $1
-- payloads past theirs, oldest first (inbox_settings): one bounded step,
-- repeated by the caller, so that no single transaction grows with the
-- backlog (docs/design.md#the-dedup-window).
SELECT deleted, cleared
FROM inbox_prune_parked($1)
