//! The `OrderPlaced` event: decoding and validation, pure and without I/O.
//!
//! `decode` turns the raw bytes and headers of a Kafka record into either a
//! valid [`OrderPlaced`] with its ledger fingerprint ([`Decoded`]) or a
//! [`Rejection`] carrying one of the parking reasons of
//! docs/design.md#outcomes. A record is the event itself (plain, or
//! CloudEvents binary mode with `ce_*` headers) or a CloudEvents
//! structured-mode envelope with the event as its `data`; `content_mode`
//! tells them apart (docs/design.md#cloudevents-binary-and-structured-mode).
//!
//! One JSON is read one way: the payload is parsed once (`json`, which sees
//! every member and every number as written), and that one parse gives both
//! the event and its fingerprint, under one meaning of "the same event"
//! ([`Decoded::fingerprint`]). A repeated key anywhere is refused. A
//! rejection carries the record's id whenever it can be read. It never
//! panics, whatever the bytes (property-tested and fuzzed). The same types
//! encode events for the load generator and the tests, so there is exactly
//! one definition of the schema.
//!
//! Its parts, in the order a record meets them:
//! - `cloudevents`: the record's headers, its content mode and the
//!   CloudEvents attributes each mode carries;
//! - `json`: the one parse of a payload, every member and number as written;
//! - `decode`: validation, from one parse to a [`Decoded`] or a [`Rejection`];
//! - `schema`: the event's limits and types, and its canonical JSON;
//! - `fingerprint`: what the ledger keeps to know a redelivery;
//! - `reasons`: why a record is parked ([`ParkReason`]).

mod cloudevents;
mod decode;
mod fingerprint;
mod json;
mod reasons;
mod schema;
#[cfg(test)]
mod testing;

pub use cloudevents::{
    Header, CLOUDEVENTS_MEDIA_TYPE_PREFIX, CLOUDEVENTS_SPEC_VERSION, HEADER_CE_ID,
    HEADER_CE_PREFIX, HEADER_CE_TIME, HEADER_CE_TYPE, HEADER_CONTENT_TYPE,
};
pub use decode::{decode, Decoded};
pub use fingerprint::payload_hash;
pub use reasons::{ParkReason, Rejection};
pub use schema::{
    OrderLine, OrderPlaced, EVENT_TYPE, MAX_IDENTIFIER_CHARS, MAX_ID_READ_BYTES, MAX_LINES,
    MAX_PAYLOAD_BYTES, MAX_QUANTITY, SCHEMA_VERSION,
};
