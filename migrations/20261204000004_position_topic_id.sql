-- A position belongs to one topic, and a topic deleted and created again
-- under the same name is another one: Kafka gives each its own id
-- (KIP-516). Positions record the id of the topic they were written for; a
-- position of a topic's earlier life is never a place to start the new one
-- at (its records would be skipped). NULL: written before ids were kept,
-- or by a consumer whose broker does not say; taken for the current topic.
ALTER TABLE inbox_position ADD COLUMN topic_id uuid;

GRANT UPDATE (topic_id) ON inbox_position TO inventory_app;
