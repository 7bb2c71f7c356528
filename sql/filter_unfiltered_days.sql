-- How many closed days of the ledger (yesterday or older) are looked up in
-- full by every batch: no clean filter, or one the slots do not hold yet
-- (docs/design.md#the-filter-of-closed-days; inbox_ledger_closed_days is
-- the one definition of "filtered", which sql/apply_batch.sql reads too).
SELECT count(*) FROM inbox_ledger_closed_days() WHERE NOT filtered
