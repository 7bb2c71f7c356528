//! Decoding and validation: one record's bytes and headers to a valid
//! [`OrderPlaced`] with its fingerprint ([`Decoded`]), or a [`Rejection`].
//! Pure: the same input always gives the same answer, and no input makes it
//! panic (property-tested and fuzzed). A rejection names the record's id
//! whenever it can be read; the reason is the first thing wrong.

use std::collections::HashSet;
use std::ops::Deref;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::cloudevents::{
    check_event_type, content_mode, envelope_attributes, envelope_data, header_attributes,
    id_in_headers, Attribute, Attributes, ContentMode, Header,
};
use super::fingerprint::fingerprint;
use super::json::{self, Object, Value};
use super::reasons::{truncate, ParkReason, Rejection};
use super::schema::{
    OrderLine, OrderPlaced, MAX_IDENTIFIER_CHARS, MAX_ID_READ_BYTES, MAX_LINES, MAX_PAYLOAD_BYTES,
    MAX_QUANTITY, SCHEMA_VERSION,
};

/// A record that decoded as an event, and its fingerprint, both from one
/// parse of its payload. It reads as its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub event: OrderPlaced,
    /// What the ledger keeps of the event, so that a redelivery is told
    /// from another event under the same id (`processed_inbox.payload_hash`,
    /// docs/design.md#outcomes): a 64-bit FNV-1a hash of the event's JSON in
    /// a canonical form, the same however a producer writes the same event
    /// out, different when a value differs. The canonical form:
    ///
    /// - the event's JSON is the record's value in binary mode, the
    ///   envelope's `data` in structured mode; the CloudEvents attributes
    ///   around it (`ce_*` headers, `id`, `time`, `source`, …) are not in
    ///   it, so the same CloudEvent sent in either mode is the same event;
    /// - an object is its members sorted by key (no key twice: a repeated
    ///   key is refused before); an array its items in order; a string its
    ///   text, escapes read;
    /// - a number is its exact decimal value, as the decoder reads it:
    ///   `2`, `2.0`, `2e0` and `0.2e1` are one number (the integer the
    ///   decoder accepts as a quantity), `2e18` is `2000000000000000000`,
    ///   `9007199254740993.0` is not `9007199254740992`; `"2"` is a string;
    /// - `occurred_at` is the instant it names, as the decoder reads it:
    ///   `…T12:00:00Z`, `…T12:00:00.000+00:00` and `…T13:00:00+01:00` are
    ///   one time (its text in the hash is that instant as `to_json`
    ///   writes it); any other string is its text;
    /// - `event_id`, when it is a UUID, is that UUID, however spelled
    ///   (capitals, braces), as the decoder compares it.
    ///
    /// So the fingerprint of an event written as `to_json` writes it
    /// (integers, strings, its time) is what it was before numbers and times
    /// were read this way, and ledger rows written then still know their
    /// redeliveries; one spelled otherwise may have a new one
    /// (docs/design.md#the-batch-transaction).
    pub fingerprint: i64,
}

impl Deref for Decoded {
    type Target = OrderPlaced;

    fn deref(&self) -> &OrderPlaced {
        &self.event
    }
}

/// Decodes and validates one record, and fingerprints its event, from one
/// parse. Pure: the same input always gives the same answer, and no input
/// makes it panic. A rejection names the record's id whenever one can be
/// read by the rules that name a valid event's: the reason is still the
/// first thing wrong.
pub fn decode(payload: Option<&[u8]>, headers: &[Header]) -> Result<Decoded, Rejection> {
    let payload = payload.unwrap_or_default();
    if payload.len() <= MAX_PAYLOAD_BYTES {
        return read(payload, headers);
    }
    // Too large to apply; read while that is cheap only to name it.
    let message_id = if payload.len() <= MAX_ID_READ_BYTES {
        match read(payload, headers) {
            Ok(decoded) => Some(decoded.event.message_id),
            Err(rejection) => rejection.message_id,
        }
    } else {
        id_in_headers(headers)
    };
    Err(Rejection {
        reason: ParkReason::PayloadTooLarge,
        detail: format!(
            "payload is {} bytes, limit {MAX_PAYLOAD_BYTES}",
            payload.len()
        ),
        message_id,
    })
}

/// `decode` of a payload of any size.
fn read(payload: &[u8], headers: &[Header]) -> Result<Decoded, Rejection> {
    let not_json = |detail: String| {
        Rejection::new(ParkReason::MalformedJson, detail).naming(id_in_headers(headers))
    };
    if payload.is_empty() {
        return Err(not_json("empty payload".into()));
    }
    let parsed = json::parse(payload).map_err(|e| not_json(e.to_string()))?;
    let Some(document) = parsed.value.as_object() else {
        return Err(not_json("payload is not a JSON object".into()));
    };
    let mode = content_mode(headers, Some(document));
    let (event, attributes) = match mode {
        ContentMode::Binary => (Some(document), header_attributes(headers)),
        ContentMode::Structured => (
            document.get("data").and_then(Value::as_object),
            envelope_attributes(document),
        ),
    };
    // The identity is read first, so that every rejection can name it.
    let identity = message_id(event.and_then(|e| e.get("event_id")), &attributes.id);
    let id = match &identity {
        Ok(id) => Some(*id),
        Err(rejection) => rejection.message_id,
    };
    let repeats = parsed.repeats;
    let checked = move || {
        if repeats {
            return Err(repeated_key(document));
        }
        let event = match mode {
            ContentMode::Binary => {
                check_event_type(document, headers)?;
                document
            }
            ContentMode::Structured => envelope_data(document)?,
        };
        check_schema_version(event)?;
        let order = order(event, &attributes, identity?)?;
        let fingerprint = fingerprint(event, order.occurred_at);
        Ok(Decoded {
            event: order,
            fingerprint,
        })
    };
    checked().map_err(|rejection: Rejection| rejection.naming(id))
}

/// A payload with a key repeated in one of its objects: its meaning
/// depends on the parser, so it has none (RFC 8259 §4).
fn repeated_key(document: &Object<'_>) -> Rejection {
    let detail = match document.first_repeat() {
        Some((path, key)) if path.is_empty() => format!("repeated key {:?}", truncate(key)),
        Some((path, key)) => format!("repeated key {:?} in {}", truncate(key), truncate(&path)),
        None => "repeated key".into(),
    };
    Rejection::new(ParkReason::MalformedJson, detail)
}

/// Both modes: the event carries `schema_version` 1 (`1.0` is 1, as
/// everywhere a number is read); no CloudEvents attribute stands in for it.
fn check_schema_version(event: &Object<'_>) -> Result<(), Rejection> {
    let reject = |detail: &str| Err(Rejection::new(ParkReason::UnsupportedSchemaVersion, detail));
    match event.get("schema_version") {
        None => reject("schema_version is missing"),
        Some(version) if version.as_integer() == Some(i128::from(SCHEMA_VERSION)) => Ok(()),
        Some(_) => reject("schema_version is not 1"),
    }
}

/// The order of an event (the value in binary mode, `data` in structured
/// mode), its event time completed by the attributes.
fn order(
    event: &Object<'_>,
    attributes: &Attributes<'_>,
    message_id: Uuid,
) -> Result<OrderPlaced, Rejection> {
    let occurred_at = occurred_at(event.get("occurred_at"), &attributes.time)?;
    let order_id = identifier(event.get("order_id"), "order_id")?.to_owned();
    let lines = order_lines(event.get("lines"))?;
    Ok(OrderPlaced {
        message_id,
        order_id,
        occurred_at,
        lines,
    })
}

/// The event time: `occurred_at`, or the time attribute where it is
/// missing or null (a null occurred_at is no event time of the event's).
fn occurred_at(
    value: Option<&Value<'_>>,
    time: &Attribute<'_>,
) -> Result<DateTime<Utc>, Rejection> {
    let invalid = |detail: String| Rejection::new(ParkReason::InvalidField, detail);
    match value.filter(|value| !value.is_null()) {
        Some(value) => match value.as_str() {
            Some(text) => parse_time(text).ok_or_else(|| {
                invalid(format!("occurred_at {:?} is not RFC 3339", truncate(text)))
            }),
            None => Err(invalid("occurred_at is not a string".into())),
        },
        None => match time.value {
            Some(Ok(text)) => parse_time(text).ok_or_else(|| {
                invalid(format!(
                    "{} {:?} is not RFC 3339",
                    time.name,
                    truncate(text)
                ))
            }),
            Some(Err(detail)) => Err(invalid(detail.into())),
            None => Err(Rejection::new(
                ParkReason::MissingEventTime,
                format!("neither occurred_at nor {}", time.name),
            )),
        },
    }
}

/// An `order_id` or `sku` (named `name` where the event holds it): 1-128
/// chars of `[A-Za-z0-9._:-]`. A null one is a missing one.
fn identifier<'v>(value: Option<&'v Value<'_>>, name: &str) -> Result<&'v str, Rejection> {
    let invalid = |detail: String| Err(Rejection::new(ParkReason::InvalidField, detail));
    match value.filter(|value| !value.is_null()).map(Value::as_str) {
        Some(Some(text)) if is_identifier(text) => Ok(text),
        Some(Some(_)) => invalid(format!(
            "{name} must be 1-{MAX_IDENTIFIER_CHARS} chars of [A-Za-z0-9._:-]"
        )),
        Some(None) => invalid(format!("{name} is not a string")),
        None => invalid(format!("{name} is missing")),
    }
}

/// The order's lines: 1 to `MAX_LINES`, each a valid SKU (none twice) and
/// a quantity in 1 to `MAX_QUANTITY` (an integer, however written).
fn order_lines(value: Option<&Value<'_>>) -> Result<Vec<OrderLine>, Rejection> {
    let invalid = |detail: String| Rejection::new(ParkReason::InvalidField, detail);
    let raw_lines = match value.map(Value::as_array) {
        Some(Some(lines)) => lines,
        Some(None) => return Err(invalid("lines is not an array".into())),
        None => return Err(invalid("lines is missing".into())),
    };
    if raw_lines.is_empty() || raw_lines.len() > MAX_LINES {
        return Err(invalid(format!(
            "an order has 1-{MAX_LINES} lines, not {}",
            raw_lines.len()
        )));
    }
    let mut lines = Vec::with_capacity(raw_lines.len());
    let mut skus = HashSet::with_capacity(raw_lines.len());
    for (index, raw) in raw_lines.iter().enumerate() {
        let Some(raw) = raw.as_object() else {
            return Err(invalid(format!("lines[{index}] is not an object")));
        };
        let sku = identifier(raw.get("sku"), &format!("lines[{index}].sku"))?;
        let quantity = match raw.get("quantity").map(Value::as_integer) {
            Some(Some(q)) if (1..=i128::from(MAX_QUANTITY)).contains(&q) => q as i32,
            Some(_) => {
                return Err(invalid(format!(
                    "lines[{index}].quantity must be an integer in 1-{MAX_QUANTITY}"
                )))
            }
            None => return Err(invalid(format!("lines[{index}].quantity is missing"))),
        };
        if !skus.insert(sku) {
            return Err(invalid(format!("sku {sku:?} appears more than once")));
        }
        lines.push(OrderLine {
            sku: sku.to_owned(),
            quantity,
        });
    }
    Ok(lines)
}

/// The dedup identity: the id attribute (`ce_id`, or the envelope's `id`)
/// when present, else `event_id`; both present and different is a producer
/// error, not something to guess about. With an id attribute, an
/// `event_id` that is not a UUID (or null) is not an identity and is
/// ignored.
fn message_id(payload_id: Option<&Value<'_>>, id: &Attribute<'_>) -> Result<Uuid, Rejection> {
    let attribute_id = match id.value {
        Some(Ok(text)) => Some(parse_uuid(text, id.name)?),
        Some(Err(detail)) => return Err(Rejection::new(ParkReason::InvalidEventId, detail)),
        None => None,
    };
    // With an id attribute, the payload's event_id only has to agree when
    // it is an id at all: the identity is the attribute's.
    let payload_id = match (payload_id, attribute_id) {
        (None, _) => None,
        (Some(value), Some(_)) => value.as_str().and_then(|text| Uuid::parse_str(text).ok()),
        (Some(value), None) => match value.as_str() {
            Some(text) => Some(parse_uuid(text, "event_id")?),
            None => {
                return Err(Rejection::new(
                    ParkReason::InvalidEventId,
                    "event_id is not a string",
                ))
            }
        },
    };
    match (attribute_id, payload_id) {
        (Some(a), Some(p)) if a != p => Err(Rejection {
            reason: ParkReason::EventIdMismatch,
            detail: format!("{} {a} differs from event_id {p}", id.name),
            message_id: Some(a),
        }),
        (Some(found), _) | (None, Some(found)) => Ok(found),
        (None, None) => Err(Rejection::new(
            ParkReason::MissingEventId,
            format!("neither {} nor event_id", id.name),
        )),
    }
}

fn parse_uuid(text: &str, name: &str) -> Result<Uuid, Rejection> {
    Uuid::parse_str(text).map_err(|_| {
        Rejection::new(
            ParkReason::InvalidEventId,
            format!("{name} {:?} is not a UUID", truncate(text)),
        )
    })
}

fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// `order_id` and `sku`: 1-128 chars of `[A-Za-z0-9._:-]`.
fn is_identifier(text: &str) -> bool {
    (1..=MAX_IDENTIFIER_CHARS).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

#[cfg(test)]
mod tests {
    use crate::event::testing::*;
    use crate::event::*;
    use proptest::prelude::*;
    use uuid::Uuid;

    #[test]
    fn malformed_json_is_parked() {
        assert_eq!(
            decode_event(b"{not json", &[]).unwrap_err().reason,
            ParkReason::MalformedJson
        );
        assert_eq!(
            decode_event(b"[1,2]", &[]).unwrap_err().reason,
            ParkReason::MalformedJson
        );
        assert_eq!(
            decode(None, &[]).unwrap_err().reason,
            ParkReason::MalformedJson
        );
    }

    #[test]
    fn payload_over_64_kib_is_parked() {
        let big = vec![b' '; MAX_PAYLOAD_BYTES + 1];
        assert_eq!(
            decode_event(&big, &[]).unwrap_err().reason,
            ParkReason::PayloadTooLarge
        );
    }

    #[test]
    fn a_payload_of_exactly_64_kib_is_read() {
        // The sample event, padded with spaces to the limit.
        let mut payload = sample().to_json();
        payload.resize(MAX_PAYLOAD_BYTES, b' ');
        assert_eq!(decode_event(&payload, &[]), Ok(sample()));
    }

    #[test]
    fn missing_event_id_is_parked() {
        assert_eq!(
            with(|o| {
                o.remove("event_id");
            }),
            ParkReason::MissingEventId
        );
    }

    #[test]
    fn invalid_event_id_is_parked() {
        assert_eq!(
            with(|o| {
                o.insert("event_id".into(), "not-a-uuid".into());
            }),
            ParkReason::InvalidEventId
        );
        assert_eq!(
            with(|o| {
                o.insert("event_id".into(), 42.into());
            }),
            ParkReason::InvalidEventId
        );
        let bytes = sample().to_json();
        let headers = [header_of("ce_id", "nope")];
        assert_eq!(
            decode_event(&bytes, &headers).unwrap_err().reason,
            ParkReason::InvalidEventId
        );
    }

    #[test]
    fn missing_event_time_is_parked() {
        assert_eq!(
            with(|o| {
                o.remove("occurred_at");
            }),
            ParkReason::MissingEventTime
        );
    }

    #[test]
    fn unparseable_event_time_is_an_invalid_field() {
        assert_eq!(
            with(|o| {
                o.insert("occurred_at".into(), "yesterday".into());
            }),
            ParkReason::InvalidField
        );
    }

    #[test]
    fn other_event_types_are_parked() {
        assert_eq!(
            with(|o| {
                o.insert("event_type".into(), "OrderCancelled".into());
            }),
            ParkReason::UnsupportedEventType
        );
        assert_eq!(
            with(|o| {
                o.remove("event_type");
            }),
            ParkReason::UnsupportedEventType
        );
    }

    #[test]
    fn other_schema_versions_are_parked() {
        for version in [
            serde_json::json!(2),
            serde_json::json!("1"),
            serde_json::Value::Null,
        ] {
            assert_eq!(
                with(|o| {
                    o.insert("schema_version".into(), version);
                }),
                ParkReason::UnsupportedSchemaVersion
            );
        }
    }

    #[test]
    fn field_limits_are_enforced() {
        for (index, case) in limit_violations().iter().enumerate() {
            assert_eq!(with(case), ParkReason::InvalidField, "case {index}");
        }
        // The edges themselves are accepted.
        let mut value = sample_json();
        let lines: Vec<_> = (0..100)
            .map(|i| serde_json::json!({"sku": format!("S{i}"), "quantity": if i == 0 { 10_000 } else { 1 }}))
            .collect();
        value["lines"] = lines.into();
        value["order_id"] = "o".repeat(128).into();
        assert!(decode_event(&serde_json::to_vec(&value).unwrap(), &[]).is_ok());
    }

    #[test]
    fn unsupported_schema_version_keeps_the_event_id() {
        let id = Some(sample().message_id);
        let bytes = sample_bytes(|v| v["schema_version"] = 2.into());
        let rejection = decode_event(&bytes, &[]).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::UnsupportedSchemaVersion, id)
        );
        for rejection in [
            envelope_with(|v| v["specversion"] = "0.3".into()),
            envelope_with(|v| v["data"]["schema_version"] = 2.into()),
        ] {
            assert_eq!(
                (rejection.reason, rejection.message_id),
                (ParkReason::UnsupportedSchemaVersion, id)
            );
        }
    }

    #[test]
    fn unsupported_event_type_keeps_the_event_id() {
        let id = Some(sample().message_id);
        let bytes = sample_bytes(|v| v["event_type"] = "OrderCancelled".into());
        let rejection = decode_event(&bytes, &[]).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::UnsupportedEventType, id)
        );
        // The id of a ce_id header, whatever the value says of its type.
        let other = "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11";
        let headers = [
            header_of(HEADER_CE_ID, other),
            header_of(HEADER_CE_TYPE, "OrderCancelled"),
        ];
        let rejection = decode_event(&sample().to_json(), &headers).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (
                ParkReason::UnsupportedEventType,
                Uuid::parse_str(other).ok()
            )
        );
        let rejection = envelope_with(|v| v["type"] = "OrderCancelled".into());
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::UnsupportedEventType, id)
        );
    }

    #[test]
    fn payload_too_large_keeps_the_event_id() {
        let id = sample().message_id;
        let padded = |size: usize| {
            let mut payload = sample().to_json();
            payload.resize(size, b' ');
            payload
        };
        let rejection = decode_event(&padded(MAX_PAYLOAD_BYTES + 1), &[]).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::PayloadTooLarge, Some(id))
        );
        let mut envelope = envelope_json();
        envelope["source"] = "x".repeat(MAX_PAYLOAD_BYTES).into();
        let rejection = decode_value(&envelope, &[]).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::PayloadTooLarge, Some(id))
        );
        // Past what is worth reading, only a ce_id header's id is kept.
        let huge = padded(MAX_ID_READ_BYTES + 1);
        assert_eq!(decode_event(&huge, &[]).unwrap_err().message_id, None);
        let other = Uuid::new_v4();
        let headers = [header_of("ce_id", &other.to_string())];
        let rejection = decode_event(&huge, &headers).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::PayloadTooLarge, Some(other))
        );
    }

    #[test]
    fn a_record_that_is_no_event_keeps_the_id_it_can_still_name() {
        // Binary mode by its ce_ headers: ce_id names the record.
        let id = Uuid::new_v4();
        let headers = [header_of("ce_id", &id.to_string())];
        let rejection = decode_event(b"{not json", &headers).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::MalformedJson, Some(id))
        );
        // A structured envelope without an order keeps its own id.
        let rejection = envelope_with(|v| v["data"] = 42.into());
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::MalformedJson, Some(sample().message_id))
        );
    }

    #[test]
    fn repeated_keys_are_refused_wherever_they_are() {
        let lines =
            r#""lines":[{"sku":"SKU-42","quantity":1}],"lines":[{"sku":"SKU-42","quantity":9}]"#;
        let event = |extra: &str| {
            format!(
                r#"{{"event_id":"6f1c2f8e-3c0b-4f5e-9a59-1d2f0e3b7c11","event_type":"OrderPlaced",
                "schema_version":1,"order_id":"ORD-1001","occurred_at":"2026-12-02T12:00:00Z",{extra}{lines}}}"#
            )
        };
        // Few members or many: simd-json kept the first, then the last.
        let many: String = (0..40).map(|i| format!(r#""x{i}":{i},"#)).collect();
        for payload in [event(""), event(&many)] {
            let rejection = decode_event(payload.as_bytes(), &[]).unwrap_err();
            assert_eq!(rejection.reason, ParkReason::MalformedJson);
            assert_eq!(rejection.detail, "repeated key \"lines\"");
            assert_eq!(rejection.message_id, Some(sample().message_id));
        }
        let inner = sample()
            .to_json()
            .iter()
            .map(|b| *b as char)
            .collect::<String>()
            .replacen(r#""quantity":2"#, r#""quantity":2,"quantity":9"#, 1);
        let rejection = decode_event(inner.as_bytes(), &[]).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.detail.as_str()),
            (
                ParkReason::MalformedJson,
                "repeated key \"quantity\" in lines[0]"
            )
        );
        // In a CloudEvents envelope, and in its data.
        let envelope = String::from_utf8(serde_json::to_vec(&envelope_json()).unwrap()).unwrap();
        for (payload, detail) in [
            (
                envelope.replacen(r#""type":"#, r#""type":"OrderPlaced","type":"#, 1),
                "repeated key \"type\"",
            ),
            (
                envelope.replacen(r#""order_id":"#, r#""order_id":"ORD-1","order_id":"#, 1),
                "repeated key \"order_id\" in data",
            ),
        ] {
            let rejection = decode_event(payload.as_bytes(), &[]).unwrap_err();
            assert_eq!(
                (rejection.reason, rejection.detail.as_str()),
                (ParkReason::MalformedJson, detail),
                "{payload}"
            );
        }
        // An id that is itself repeated names nothing.
        let twice = String::from_utf8(sample().to_json()).unwrap().replacen(
            r#""event_id":"#,
            r#""event_id":"0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11","event_id":"#,
            1,
        );
        let rejection = decode_event(twice.as_bytes(), &[]).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::MalformedJson, None)
        );
    }

    #[test]
    fn a_missing_order_id_is_said_to_be_missing() {
        for (edit, detail) in [
            (None, "order_id is missing"),
            (Some(serde_json::json!(7)), "order_id is not a string"),
            (
                Some(serde_json::json!("ORD 1")),
                "order_id must be 1-128 chars of [A-Za-z0-9._:-]",
            ),
        ] {
            let bytes = sample_bytes(|v| match edit {
                None => {
                    v.as_object_mut().unwrap().remove("order_id");
                }
                Some(other) => v["order_id"] = other,
            });
            let rejection = decode_event(&bytes, &[]).unwrap_err();
            assert_eq!(
                (rejection.reason, rejection.detail.as_str()),
                (ParkReason::InvalidField, detail)
            );
        }
    }

    #[test]
    fn a_payload_that_is_not_json_is_explained_in_words() {
        for (payload, detail) in [
            (&b"garbage"[..], "not JSON: expected a value at byte 0"),
            (
                b"{\"a\":1,}",
                "not JSON: expected a key in quotes at byte 7",
            ),
            (b"{\"a\" 1}", "not JSON: expected ':' after a key at byte 5"),
            (
                b"{\"a\":1} x",
                "not JSON: unexpected text after the value at byte 8",
            ),
            (
                b"{\"a\":\"b",
                "not JSON: a string without its closing quote at byte 5",
            ),
            (
                b"{\"a\":01}",
                "not JSON: a number with a leading zero at byte 5",
            ),
            (b"{\"a\":\xff}", "not JSON: not UTF-8 at byte 5"),
            (b"{\"a\":[1 2]}", "not JSON: expected ',' or ']' at byte 8"),
        ] {
            let rejection = decode_event(payload, &[]).unwrap_err();
            assert_eq!(
                (rejection.reason, rejection.detail.as_str()),
                (ParkReason::MalformedJson, detail),
                "{}",
                String::from_utf8_lossy(payload)
            );
        }
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(Some(&bytes), &[]);
        }

        #[test]
        fn arbitrary_json_text_never_panics(text in "[{}\\[\\]\":,0-9a-z_ .\\-]{0,200}") {
            let _ = decode(Some(text.as_bytes()), &[header_of("ce_time", &text)]);
        }

        #[test]
        fn mutated_valid_events_never_panic(
            position in 0usize..200,
            byte in any::<u8>(),
            header in proptest::option::of("[ -~]{0,40}"),
        ) {
            let mut bytes = sample().to_json();
            let position = position % bytes.len();
            bytes[position] = byte;
            let headers: Vec<Header> = header.iter().map(|h| header_of("ce_id", h)).collect();
            let _ = decode(Some(&bytes), &headers);
        }
    }
}
