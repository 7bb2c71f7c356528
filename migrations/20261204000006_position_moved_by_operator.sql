-- A position an operator moved (`inventory-inbox positions set`) says so,
-- until the next batch moves it on: a consumer that finds its partition's
-- position behind what it wrote then reads again from there as asked,
-- rather than reporting a database restored from a backup.
ALTER TABLE inbox_position ADD COLUMN moved_by_operator boolean NOT NULL DEFAULT false;

GRANT UPDATE (moved_by_operator) ON inbox_position TO inventory_app;
