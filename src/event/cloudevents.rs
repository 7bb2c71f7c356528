//! The CloudEvents Kafka binding: a record's headers, its content mode
//! (binary or structured, docs/design.md#cloudevents-binary-and-structured-mode)
//! and the attributes (id, time, type) each mode carries. Header keys are
//! compared ignoring ASCII case, wherever a header is read.

use uuid::Uuid;

use super::json::{Object, Value};
use super::reasons::{truncate, ParkReason, Rejection};
use super::schema::EVENT_TYPE;

/// CloudEvents Kafka binding header carrying the event id.
pub const HEADER_CE_ID: &str = "ce_id";
/// CloudEvents Kafka binding header carrying the event time.
pub const HEADER_CE_TIME: &str = "ce_time";
/// CloudEvents Kafka binding header carrying the event type.
pub const HEADER_CE_TYPE: &str = "ce_type";
/// Prefix of every CloudEvents attribute header in binary mode.
pub const HEADER_CE_PREFIX: &str = "ce_";
/// Kafka header carrying the media type of the record's value.
pub const HEADER_CONTENT_TYPE: &str = "content-type";
/// A `content-type` beginning with this marks a structured-mode record.
pub const CLOUDEVENTS_MEDIA_TYPE_PREFIX: &str = "application/cloudevents";
/// The only CloudEvents version this consumer reads.
pub const CLOUDEVENTS_SPEC_VERSION: &str = "1.0";
/// The envelope member that names the CloudEvents version.
const ENVELOPE_SPECVERSION: &str = "specversion";

/// One Kafka record header, as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub key: String,
    pub value: Option<Vec<u8>>,
}

/// The id of a record whose payload cannot be read, or is too large to
/// be: binary mode's `ce_id` header, when it is a UUID.
pub(super) fn id_in_headers(headers: &[Header]) -> Option<Uuid> {
    match content_mode(headers, None) {
        ContentMode::Binary => match header_attributes(headers).id.value {
            Some(Ok(text)) => Uuid::parse_str(text).ok(),
            _ => None,
        },
        ContentMode::Structured => None,
    }
}

/// How a record carries its CloudEvents attributes: the two content modes
/// of the CloudEvents Kafka binding (docs/design.md#the-event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ContentMode {
    /// The value is the event; its attributes, if any, are `ce_*` headers.
    /// A record without CloudEvents headers is read this way too.
    Binary,
    /// The value is a CloudEvents JSON envelope; the event is its `data`.
    Structured,
}

/// The content mode of a record, decided in this order
/// (docs/design.md#cloudevents-binary-and-structured-mode):
/// 1. a `content-type` header whose media type begins with
///    `application/cloudevents`: structured (the binding's own rule);
/// 2. else any header whose key begins with `ce_`: binary (as the
///    CloudEvents SDK's `from_kafka` decides; a structured record has none);
/// 3. else a value that is a JSON object with a top-level `specversion`
///    member: structured (the SDK's `cloudevents.v1.kafka` sends structured
///    events as `application/json`, and the event's own schema has no
///    `specversion`);
/// 4. else binary (also when the value cannot be read: `document` none).
///
/// Header keys are compared ignoring ASCII case, as the SDK reads them,
/// here and wherever a header is read (`header`).
pub(super) fn content_mode(headers: &[Header], document: Option<&Object<'_>>) -> ContentMode {
    let content_type = header(headers, HEADER_CONTENT_TYPE).flatten();
    if content_type.is_some_and(is_cloudevents_media_type) {
        return ContentMode::Structured;
    }
    let prefix = HEADER_CE_PREFIX.as_bytes();
    let binary_header = headers.iter().any(|h| {
        h.key
            .as_bytes()
            .get(..prefix.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(prefix))
    });
    if binary_header {
        return ContentMode::Binary;
    }
    match document {
        Some(object) if object.contains_key(ENVELOPE_SPECVERSION) => ContentMode::Structured,
        _ => ContentMode::Binary,
    }
}

/// `application/cloudevents+json` and its kin, parameters and case aside.
fn is_cloudevents_media_type(value: &[u8]) -> bool {
    let media_type = value.split(|b| *b == b';').next().unwrap_or_default();
    let media_type = media_type.trim_ascii();
    let prefix = CLOUDEVENTS_MEDIA_TYPE_PREFIX.as_bytes();
    media_type
        .get(..prefix.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(prefix))
}

/// Binary mode: with a `ce_type` header, that is the event's type: it must
/// be `OrderPlaced`, and the value's own `event_type`, if any, must agree
/// (as `type` and `data.event_type` in structured mode). Without one, the
/// value's own `event_type` must be `OrderPlaced`.
pub(super) fn check_event_type(event: &Object<'_>, headers: &[Header]) -> Result<(), Rejection> {
    let reject = |detail: String| Err(Rejection::new(ParkReason::UnsupportedEventType, detail));
    let Some(ce_type) = header(headers, HEADER_CE_TYPE) else {
        return match event.get("event_type").map(Value::as_str) {
            Some(Some(EVENT_TYPE)) => Ok(()),
            Some(Some(other)) => reject(format!("event_type {:?}", truncate(other))),
            _ => reject("event_type is missing or not a string".into()),
        };
    };
    match ce_type.map(std::str::from_utf8) {
        Some(Ok(EVENT_TYPE)) => own_event_type_agrees(event, "event_type", HEADER_CE_TYPE),
        Some(Ok(other)) => reject(format!("{HEADER_CE_TYPE} {:?}", truncate(other))),
        _ => reject(format!("{HEADER_CE_TYPE} header is empty or not UTF-8")),
    }
}

/// The event's own `event_type` (named `field` where the record holds it),
/// when it has one, agrees with the CloudEvents type attribute
/// (`attribute`), which is `OrderPlaced`.
fn own_event_type_agrees(
    event: &Object<'_>,
    field: &str,
    attribute: &str,
) -> Result<(), Rejection> {
    let reject = |detail: String| Err(Rejection::new(ParkReason::UnsupportedEventType, detail));
    match event.get("event_type").map(Value::as_str) {
        None | Some(Some(EVENT_TYPE)) => Ok(()),
        Some(Some(other)) => reject(format!(
            "{field} {:?} disagrees with {attribute} {EVENT_TYPE:?}",
            truncate(other)
        )),
        Some(None) => reject(format!("{field} is not a string")),
    }
}

/// The CloudEvents attributes decoding reads, from where the content mode
/// carries them: `ce_id` and `ce_time` headers in binary mode, the
/// envelope's `id` and `time` in structured mode.
pub(super) struct Attributes<'a> {
    /// Stands in for a missing `event_id`; must agree with a present one.
    pub(super) id: Attribute<'a>,
    /// The event time when the event has no `occurred_at`.
    pub(super) time: Attribute<'a>,
}

/// One attribute: its name as the record spells it (for parking details)
/// and its text, `Some(Err(detail))` when it is there but is no text.
pub(super) struct Attribute<'a> {
    pub(super) name: &'static str,
    pub(super) value: Option<Result<&'a str, &'static str>>,
}

/// Binary mode's attributes. A `ce_time` that is not UTF-8 counts as absent.
pub(super) fn header_attributes(headers: &[Header]) -> Attributes<'_> {
    Attributes {
        id: Attribute {
            name: HEADER_CE_ID,
            value: header(headers, HEADER_CE_ID).map(|value| {
                value
                    .and_then(|bytes| std::str::from_utf8(bytes).ok())
                    .ok_or("ce_id header is not UTF-8")
            }),
        },
        time: Attribute {
            name: HEADER_CE_TIME,
            value: header_text(headers, HEADER_CE_TIME).map(Ok),
        },
    }
}

/// Structured mode's attributes: the envelope's `id` and `time`.
pub(super) fn envelope_attributes<'a>(envelope: &'a Object<'_>) -> Attributes<'a> {
    let attribute = |name: &'static str, not_text: &'static str| Attribute {
        name,
        // A null attribute is an absent one, as a null occurred_at is.
        value: envelope
            .get(name)
            .filter(|value| !value.is_null())
            .map(|value| value.as_str().ok_or(not_text)),
    };
    Attributes {
        id: attribute("id", "id is not a string"),
        time: attribute("time", "time is not a string"),
    }
}

/// Structured mode: the envelope's own checks (`specversion` 1.0, `type`
/// `OrderPlaced`, the order as a JSON object in `data`), then `data` as the
/// event, held to binary mode's rules except that `type` stands in for
/// its `event_type`, which may then be absent.
pub(super) fn envelope_data<'d, 'a>(envelope: &'d Object<'a>) -> Result<&'d Object<'a>, Rejection> {
    let reject = |reason, detail: &str| Err(Rejection::new(reason, detail));
    check_envelope_version_and_type(envelope)?;
    if envelope.contains_key("data_base64") {
        return reject(
            ParkReason::MalformedJson,
            "data_base64: the order must be a JSON object in data, not binary data",
        );
    }
    let event = match envelope.get("data").map(Value::as_object) {
        Some(Some(event)) => event,
        Some(None) => return reject(ParkReason::MalformedJson, "data is not a JSON object"),
        None => {
            return reject(
                ParkReason::MalformedJson,
                "CloudEvents envelope without data",
            )
        }
    };
    own_event_type_agrees(event, "data.event_type", "type")?;
    Ok(event)
}

/// A structured-mode envelope's `specversion` is 1.0 and its `type` is
/// `OrderPlaced`.
fn check_envelope_version_and_type(envelope: &Object<'_>) -> Result<(), Rejection> {
    let reject = |reason, detail: String| Err(Rejection::new(reason, detail));
    match envelope.get(ENVELOPE_SPECVERSION).map(|v| v.as_str()) {
        Some(Some(CLOUDEVENTS_SPEC_VERSION)) => {}
        Some(Some(other)) => {
            return reject(
                ParkReason::UnsupportedSchemaVersion,
                format!(
                    "CloudEvents specversion {:?}; only {CLOUDEVENTS_SPEC_VERSION} is read",
                    truncate(other)
                ),
            )
        }
        Some(None) => {
            return reject(
                ParkReason::UnsupportedSchemaVersion,
                "CloudEvents specversion is not a string".into(),
            )
        }
        None => {
            return reject(
                ParkReason::UnsupportedSchemaVersion,
                "CloudEvents envelope without specversion".into(),
            )
        }
    }
    match envelope.get("type").map(|v| v.as_str()) {
        Some(Some(EVENT_TYPE)) => {}
        Some(Some(other)) => {
            return reject(
                ParkReason::UnsupportedEventType,
                format!("type {:?}", truncate(other)),
            )
        }
        _ => {
            return reject(
                ParkReason::UnsupportedEventType,
                "type is missing or not a string".into(),
            )
        }
    }
    Ok(())
}

/// The value of the last header with that key, ignoring ASCII case as
/// `content_mode` does (`CE_ID` is `ce_id`); `Some(None)` for a null value.
fn header<'a>(headers: &'a [Header], key: &str) -> Option<Option<&'a [u8]>> {
    headers
        .iter()
        .rev()
        .find(|h| h.key.eq_ignore_ascii_case(key))
        .map(|h| h.value.as_deref())
}

fn header_text<'a>(headers: &'a [Header], key: &str) -> Option<&'a str> {
    header(headers, key)
        .flatten()
        .and_then(|bytes| std::str::from_utf8(bytes).ok())
}

#[cfg(test)]
mod tests {
    use crate::event::testing::*;
    use crate::event::*;
    use chrono::NaiveDate;
    use proptest::prelude::*;
    use uuid::Uuid;

    #[test]
    fn ce_type_header_is_the_event_type_in_binary_mode() {
        let event = sample();
        let bytes = event.to_json();
        let placed = [header_of("ce_type", "OrderPlaced")];
        assert_eq!(decode_event(&bytes, &placed), Ok(event.clone()));

        // The header stands in for a missing event_type.
        let mut value = sample_json();
        value.as_object_mut().unwrap().remove("event_type");
        let without = serde_json::to_vec(&value).unwrap();
        assert_eq!(decode_event(&without, &placed), Ok(event));
        assert_eq!(
            reason_of(&value, &[]),
            ParkReason::UnsupportedEventType,
            "without the header an event_type is needed"
        );
        // Without the header, the type the value names is in the reason.
        let mut shipped = sample_json();
        shipped["event_type"] = "OrderShipped".into();
        let rejection = decode_event(&serde_json::to_vec(&shipped).unwrap(), &[]).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.detail.as_str()),
            (
                ParkReason::UnsupportedEventType,
                "event_type \"OrderShipped\""
            )
        );

        // Another type is parked whatever the value says, and a value that
        // disagrees with the header too.
        for (headers, payload, detail) in [
            (
                vec![header_of("ce_type", "OrderCancelled")],
                &bytes,
                "ce_type \"OrderCancelled\"",
            ),
            (
                vec![Header {
                    key: "ce_type".into(),
                    value: Some(vec![0xff, 0xfe]),
                }],
                &bytes,
                "ce_type header is empty or not UTF-8",
            ),
            (
                vec![Header {
                    key: "ce_type".into(),
                    value: None,
                }],
                &bytes,
                "ce_type header is empty or not UTF-8",
            ),
        ] {
            let rejection = decode_event(payload, &headers).unwrap_err();
            assert_eq!(rejection.reason, ParkReason::UnsupportedEventType);
            assert_eq!(rejection.detail, detail);
        }
        let mut value = sample_json();
        value["event_type"] = "OrderShipped".into();
        let rejection = decode_event(&serde_json::to_vec(&value).unwrap(), &placed).unwrap_err();
        assert_eq!(rejection.reason, ParkReason::UnsupportedEventType);
        assert_eq!(
            rejection.detail,
            "event_type \"OrderShipped\" disagrees with ce_type \"OrderPlaced\""
        );
    }

    #[test]
    fn ce_id_header_is_the_identity_when_present() {
        let mut value = sample_json();
        value.as_object_mut().unwrap().remove("event_id");
        let id = "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11";
        let bytes = serde_json::to_vec(&value).unwrap();
        let event = decode_event(&bytes, &[header_of("ce_id", id)]).unwrap();
        assert_eq!(event.message_id, Uuid::parse_str(id).unwrap());
    }

    #[test]
    fn same_id_in_header_and_payload_is_accepted() {
        let event = sample();
        let headers = [header_of(
            "ce_id",
            &event.message_id.to_string().to_uppercase(),
        )];
        assert_eq!(decode_event(&event.to_json(), &headers), Ok(event));
    }

    #[test]
    fn ce_time_header_is_the_event_time_without_occurred_at_or_with_a_null_one() {
        for without in [None, Some(serde_json::Value::Null)] {
            let mut value = sample_json();
            match &without {
                None => {
                    value.as_object_mut().unwrap().remove("occurred_at");
                }
                Some(null) => value["occurred_at"] = null.clone(),
            }
            let bytes = serde_json::to_vec(&value).unwrap();
            let event = decode(
                Some(&bytes),
                &[header_of("ce_time", "2026-11-30T23:59:59+00:00")],
            )
            .unwrap();
            assert_eq!(
                event.event_day(),
                NaiveDate::from_ymd_opt(2026, 11, 30).unwrap(),
                "{without:?}"
            );
            assert_eq!(reason_of(&value, &[]), ParkReason::MissingEventTime);
        }
    }

    #[test]
    fn with_a_ce_id_an_event_id_that_is_no_uuid_is_ignored() {
        let id = "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11";
        for event_id in [
            serde_json::json!("ORDER-EVENT-7"),
            serde_json::Value::Null,
            serde_json::json!(42),
        ] {
            let mut value = sample_json();
            value["event_id"] = event_id.clone();
            let bytes = serde_json::to_vec(&value).unwrap();
            let event = decode_event(&bytes, &[header_of("ce_id", id)])
                .unwrap_or_else(|r| panic!("{event_id}: {r:?}"));
            assert_eq!(event.message_id, Uuid::parse_str(id).unwrap());
        }
        // Without a ce_id the same payloads have no identity.
        let mut value = sample_json();
        value["event_id"] = serde_json::Value::Null;
        assert_eq!(reason_of(&value, &[]), ParkReason::InvalidEventId);
    }

    #[test]
    fn different_ids_in_header_and_payload_are_parked() {
        let bytes = sample().to_json();
        let headers = [header_of("ce_id", "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11")];
        let rejection = decode_event(&bytes, &headers).unwrap_err();
        assert_eq!(rejection.reason, ParkReason::EventIdMismatch);
        assert!(rejection.message_id.is_some());
    }

    #[test]
    fn structured_envelope_is_read_by_its_shape_or_its_content_type() {
        let envelope = envelope_json();
        for headers in [
            vec![],
            // The CloudEvents SDK's cloudevents.v1.kafka sends this.
            vec![header_of("content-type", "application/json")],
            vec![structured_content_type()],
            vec![header_of(
                "Content-Type",
                "Application/CloudEvents+JSON; charset=utf-8",
            )],
        ] {
            assert_eq!(
                decode_value(&envelope, &headers),
                Ok(sample()),
                "{headers:?}"
            );
        }
    }

    #[test]
    fn content_type_cloudevents_means_structured_whatever_the_value() {
        // Without specversion it is still taken for an envelope, a bad one.
        let rejection =
            decode_event(&sample().to_json(), &[structured_content_type()]).unwrap_err();
        assert_eq!(rejection.reason, ParkReason::UnsupportedSchemaVersion);
        assert!(
            rejection.detail.contains("specversion"),
            "{}",
            rejection.detail
        );
        // And it wins over ce_ headers, as the binding says.
        let headers = [header_of("ce_id", "nope"), structured_content_type()];
        assert_eq!(decode_value(&envelope_json(), &headers), Ok(sample()));
    }

    #[test]
    fn ce_headers_keep_a_record_in_binary_mode() {
        // A value with a specversion member, but ce_ headers: binary mode,
        // where the value itself must be the event.
        for (key, detail) in [
            ("ce_specversion", "event_type is missing or not a string"),
            ("CE_SOURCE", "event_type is missing or not a string"),
            // Read as ce_type, in any case.
            ("CE_TYPE", "ce_type \"1.0\""),
        ] {
            let rejection = decode_value(&envelope_json(), &[header_of(key, "1.0")]).unwrap_err();
            assert_eq!(rejection.reason, ParkReason::UnsupportedEventType, "{key}");
            assert_eq!(rejection.detail, detail, "{key}");
        }
        // The event itself with the SDK's binary headers is read as before.
        let event = sample();
        let headers = [
            header_of("content-type", "application/json"),
            header_of("ce_specversion", "1.0"),
            header_of("ce_id", &event.message_id.to_string()),
            header_of("ce_type", "OrderPlaced"),
            header_of("ce_source", "/shop/checkout"),
        ];
        assert_eq!(decode_event(&event.to_json(), &headers), Ok(event));
    }

    #[test]
    fn binary_and_structured_modes_decode_one_cloudevent_alike() {
        // The same CloudEvent in both modes, its data the full event body
        // that binary mode needs (event_type and schema_version).
        let id = "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11";
        let mut data = sample_json();
        for name in ["event_id", "occurred_at"] {
            data.as_object_mut().unwrap().remove(name);
        }
        let binary = decode_event(
            &serde_json::to_vec(&data).unwrap(),
            &[
                header_of("ce_specversion", "1.0"),
                header_of("ce_id", id),
                header_of("ce_type", "OrderPlaced"),
                header_of("ce_time", "2026-11-30T08:00:00Z"),
            ],
        )
        .unwrap();
        let structured = decode_value(
            &serde_json::json!({"specversion": "1.0", "id": id, "type": "OrderPlaced",
                "source": "/shop", "time": "2026-11-30T08:00:00Z", "data": data}),
            &[],
        )
        .unwrap();
        assert_eq!(binary, structured);
        assert_eq!(structured.message_id, Uuid::parse_str(id).unwrap());
    }

    #[test]
    fn structured_id_is_the_identity_and_must_be_a_uuid() {
        for id in [
            serde_json::json!("not-a-uuid"),
            serde_json::json!(42),
            serde_json::Value::Null,
        ] {
            let rejection = envelope_with(|v| v["id"] = id.clone());
            if id.is_null() {
                // A null id is no id; data has no event_id either.
                assert_eq!(rejection.reason, ParkReason::MissingEventId);
                assert_eq!(rejection.detail, "neither id nor event_id");
            } else {
                assert_eq!(rejection.reason, ParkReason::InvalidEventId, "{id}");
            }
        }
        let rejection = envelope_with(|v| v["id"] = "nope".into());
        assert_eq!(rejection.detail, "id \"nope\" is not a UUID");
    }

    #[test]
    fn structured_id_and_a_different_event_id_in_data_are_parked() {
        let other = "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11";
        let rejection = envelope_with(|v| v["data"]["event_id"] = other.into());
        assert_eq!(rejection.reason, ParkReason::EventIdMismatch);
        assert_eq!(rejection.message_id, Some(sample().message_id));
        // The same id in data, or one that is no UUID at all, is accepted.
        for event_id in [
            serde_json::json!(sample().message_id.to_string().to_uppercase()),
            serde_json::json!("ORDER-EVENT-7"),
        ] {
            let mut value = envelope_json();
            value["data"]["event_id"] = event_id;
            assert_eq!(decode_value(&value, &[]), Ok(sample()));
        }
        // Without an id attribute, data's event_id is the identity, as in
        // binary mode without ce_id.
        let mut value = envelope_json();
        value.as_object_mut().unwrap().remove("id");
        value["data"]["event_id"] = other.into();
        assert_eq!(
            decode_value(&value, &[]).unwrap().message_id,
            Uuid::parse_str(other).unwrap()
        );
    }

    #[test]
    fn structured_time_is_the_event_time_when_data_has_no_occurred_at() {
        let mut value = envelope_json();
        value["time"] = "2026-11-30T23:59:59+00:00".into();
        assert_eq!(
            decode_value(&value, &[]).unwrap().event_day(),
            NaiveDate::from_ymd_opt(2026, 11, 30).unwrap()
        );
        // occurred_at in data wins over time; a null one does not.
        value["data"]["occurred_at"] = "2026-12-01T10:00:00Z".into();
        assert_eq!(
            decode_value(&value, &[]).unwrap().event_day(),
            NaiveDate::from_ymd_opt(2026, 12, 1).unwrap()
        );
        value["data"]["occurred_at"] = serde_json::Value::Null;
        assert_eq!(
            decode_value(&value, &[]).unwrap().event_day(),
            NaiveDate::from_ymd_opt(2026, 11, 30).unwrap()
        );
    }

    #[test]
    fn structured_event_without_a_usable_time_is_parked() {
        let rejection = envelope_with(|v| {
            v.as_object_mut().unwrap().remove("time");
        });
        assert_eq!(rejection.reason, ParkReason::MissingEventTime);
        assert_eq!(rejection.detail, "neither occurred_at nor time");
        assert_eq!(rejection.message_id, Some(sample().message_id));
        assert_eq!(
            envelope_with(|v| v["time"] = serde_json::Value::Null).reason,
            ParkReason::MissingEventTime
        );
        assert_eq!(
            envelope_with(|v| v["time"] = "yesterday".into()).reason,
            ParkReason::InvalidField
        );
        assert_eq!(
            envelope_with(|v| v["time"] = 1_764_676_800.into()).detail,
            "time is not a string"
        );
    }

    #[test]
    fn structured_type_other_than_order_placed_is_parked_naming_it() {
        let rejection = envelope_with(|v| v["type"] = "OrderCancelled".into());
        assert_eq!(rejection.reason, ParkReason::UnsupportedEventType);
        assert!(
            rejection.detail.contains("OrderCancelled"),
            "{}",
            rejection.detail
        );
        for missing in [None, Some(serde_json::json!(7))] {
            let rejection = envelope_with(|v| match &missing {
                None => {
                    v.as_object_mut().unwrap().remove("type");
                }
                Some(other) => v["type"] = other.clone(),
            });
            assert_eq!(rejection.reason, ParkReason::UnsupportedEventType);
        }
    }

    #[test]
    fn structured_data_event_type_may_be_absent_but_must_agree() {
        let mut value = envelope_json();
        value["data"]["event_type"] = "OrderPlaced".into();
        assert_eq!(decode_value(&value, &[]), Ok(sample()));
        for other in [serde_json::json!("OrderShipped"), serde_json::Value::Null] {
            let rejection = envelope_with(|v| v["data"]["event_type"] = other.clone());
            assert_eq!(
                rejection.reason,
                ParkReason::UnsupportedEventType,
                "{other}"
            );
            assert!(
                rejection.detail.starts_with("data.event_type"),
                "{}",
                rejection.detail
            );
        }
    }

    #[test]
    fn structured_specversion_other_than_1_0_is_parked() {
        for version in [
            serde_json::json!("0.3"),
            serde_json::json!("1.1"),
            serde_json::json!(1.0),
            serde_json::Value::Null,
        ] {
            let rejection = envelope_with(|v| v["specversion"] = version.clone());
            assert_eq!(
                rejection.reason,
                ParkReason::UnsupportedSchemaVersion,
                "{version}"
            );
            assert!(
                rejection.detail.contains("specversion"),
                "{}",
                rejection.detail
            );
        }
        let rejection = envelope_with(|v| v["specversion"] = "0.3".into());
        assert_eq!(
            rejection.detail,
            "CloudEvents specversion \"0.3\"; only 1.0 is read"
        );
    }

    #[test]
    fn structured_data_must_be_a_json_object() {
        let rejection = envelope_with(|v| {
            let members = v.as_object_mut().unwrap();
            members.remove("data");
            members.insert("data_base64".into(), "eyJvcmRlcl9pZCI6IjEifQ==".into());
        });
        assert_eq!(rejection.reason, ParkReason::MalformedJson);
        assert!(
            rejection.detail.contains("data_base64"),
            "{}",
            rejection.detail
        );
        let rejection = envelope_with(|v| {
            v.as_object_mut().unwrap().remove("data");
        });
        assert_eq!(rejection.reason, ParkReason::MalformedJson);
        for data in [
            serde_json::json!("{\"order_id\":\"ORD-1001\"}"),
            serde_json::json!([1, 2]),
            serde_json::json!(42),
            serde_json::Value::Null,
        ] {
            let rejection = envelope_with(|v| v["data"] = data.clone());
            assert_eq!(rejection.reason, ParkReason::MalformedJson, "{data}");
            assert_eq!(rejection.detail, "data is not a JSON object");
        }
    }

    #[test]
    fn structured_data_needs_schema_version_1_as_binary_mode_does() {
        for version in [None, Some(serde_json::json!(2))] {
            let rejection = envelope_with(|v| {
                let data = v["data"].as_object_mut().unwrap();
                match &version {
                    None => {
                        data.remove("schema_version");
                    }
                    Some(other) => {
                        data.insert("schema_version".into(), other.clone());
                    }
                }
            });
            assert_eq!(rejection.reason, ParkReason::UnsupportedSchemaVersion);
        }
    }

    #[test]
    fn structured_events_keep_every_limit() {
        for (index, case) in limit_violations().iter().enumerate() {
            let rejection = envelope_with(|v| case(v["data"].as_object_mut().unwrap()));
            assert_eq!(rejection.reason, ParkReason::InvalidField, "case {index}");
        }
        // The 64 KiB are the record's value, the envelope included.
        let mut value = envelope_json();
        value["source"] = "x".repeat(MAX_PAYLOAD_BYTES).into();
        assert_eq!(
            decode_value(&value, &[]).unwrap_err().reason,
            ParkReason::PayloadTooLarge
        );
    }

    #[test]
    fn cloudevents_header_keys_are_read_ignoring_ascii_case() {
        let id = "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11";
        let mut value = sample_json();
        for name in ["event_id", "event_type", "occurred_at"] {
            value.as_object_mut().unwrap().remove(name);
        }
        let bytes = serde_json::to_vec(&value).unwrap();
        let expected = OrderPlaced {
            message_id: Uuid::parse_str(id).unwrap(),
            ..sample()
        };
        for (id_key, type_key, time_key) in [
            ("CE_ID", "CE_TYPE", "CE_TIME"),
            ("Ce_Id", "ce_Type", "cE_time"),
        ] {
            let headers = [
                header_of(id_key, id),
                header_of(type_key, "OrderPlaced"),
                header_of(time_key, "2026-12-02T12:00:00Z"),
            ];
            assert_eq!(
                decode_event(&bytes, &headers),
                Ok(expected.clone()),
                "{headers:?}"
            );
        }
        // The last header of a name wins, whatever its case.
        let headers = [
            header_of("ce_type", "OrderPlaced"),
            header_of("CE_TYPE", "OrderCancelled"),
        ];
        assert_eq!(
            decode_event(&sample().to_json(), &headers)
                .unwrap_err()
                .detail,
            "ce_type \"OrderCancelled\""
        );
    }

    proptest! {
        #[test]
        fn mutated_structured_envelopes_never_panic(
            position in 0usize..400,
            byte in any::<u8>(),
            content_type in proptest::option::of("[ -~]{0,40}"),
        ) {
            let mut bytes = serde_json::to_vec(&envelope_json()).unwrap();
            let position = position % bytes.len();
            bytes[position] = byte;
            let headers: Vec<Header> =
                content_type.iter().map(|h| header_of("content-type", h)).collect();
            let _ = decode(Some(&bytes), &headers);
        }

        #[test]
        fn arbitrary_envelope_members_never_panic(
            member in "(specversion|id|type|time|data|data_base64|event_id|occurred_at|schema_version)",
            text in "[{}\\[\\]\":,0-9a-z_ .\\-]{0,80}",
            inside_data in any::<bool>(),
        ) {
            let mut value = envelope_json();
            let replacement = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
            if inside_data {
                value["data"][member.as_str()] = replacement;
            } else {
                value[member.as_str()] = replacement;
            }
            let bytes = serde_json::to_vec(&value).unwrap();
            let _ = decode(Some(&bytes), &[structured_content_type()]);
            let _ = decode(Some(&bytes), &[]);
        }
    }
}
