-- The trace of the batch that parked a record (the W3C trace id of its
-- OpenTelemetry span, 32 hex digits; null when tracing is off): where a
-- person looking at a parked row finds the batch, and through its links the
-- producer's trace.
ALTER TABLE inbox_parked ADD COLUMN trace_id text;
