-- Completes the row of maintenance run $1 with what it did ($2..$6), or the
-- error that stopped it ($7, the counts then NULL). A run that ended is
-- never rewritten.
SELECT inbox_maintenance_ended($1, $2, $3, $4, $5, $6, $7)
