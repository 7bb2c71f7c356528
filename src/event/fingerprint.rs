//! What the ledger keeps of an event to tell a redelivery from another
//! event under the same id: the fingerprint of its canonical JSON
//! ([`Decoded::fingerprint`](super::Decoded::fingerprint)), and the older
//! hash of the payload's bytes ([`payload_hash`]).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::json::{self, Object, Value};
use super::schema::event_time_text;

/// A stable 64-bit FNV-1a hash of the payload's bytes. The ledger's rows
/// written before fingerprints were of the parsed event hold this; a
/// redelivery is still compared with it (docs/design.md#outcomes).
pub fn payload_hash(payload: &[u8]) -> i64 {
    Fnv::default().bytes(payload).0 as i64
}

/// [`Decoded::fingerprint`] of a valid event (the value, or `data`) whose
/// event time the decoder read as `occurred_at`.
pub(super) fn fingerprint(event: &Object<'_>, occurred_at: DateTime<Utc>) -> i64 {
    let hash = canonical_members(Fnv::default(), event, |key, value, hash| {
        match (key, value) {
            ("occurred_at", Value::String(_)) => {
                Some(hash.token(b's', event_time_text(occurred_at).as_bytes()))
            }
            ("event_id", Value::String(text)) => Uuid::parse_str(text).ok().map(|id| {
                hash.token(
                    b's',
                    id.hyphenated()
                        .encode_lower(&mut Uuid::encode_buffer())
                        .as_bytes(),
                )
            }),
            _ => None,
        }
    });
    hash.0 as i64
}

/// FNV-1a, 64 bits.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn bytes(self, bytes: &[u8]) -> Fnv {
        Fnv(bytes.iter().fold(self.0, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
        }))
    }

    /// A length before the bytes, so that no two sequences of tokens feed
    /// the same bytes.
    fn token(self, tag: u8, bytes: &[u8]) -> Fnv {
        self.bytes(&[tag])
            .bytes(&(bytes.len() as u64).to_le_bytes())
            .bytes(bytes)
    }
}

/// Feeds a JSON value in its canonical form ([`Decoded::fingerprint`]).
fn canonical(hash: Fnv, value: &Value<'_>) -> Fnv {
    match value {
        Value::Null => hash.token(b'n', b""),
        Value::Bool(b) => hash.token(b'b', &[u8::from(*b)]),
        Value::Number(number) => match number.canonical() {
            json::Canonical::Integer(n) => hash.token(b'i', &n.to_le_bytes()),
            json::Canonical::Double(bits) => hash.token(b'f', &bits.to_le_bytes()),
            json::Canonical::Decimal(text) => hash.token(b'd', text.as_bytes()),
        },
        Value::String(text) => hash.token(b's', text.as_bytes()),
        Value::Array(items) => items.iter().fold(
            hash.token(b'[', &(items.len() as u64).to_le_bytes()),
            canonical,
        ),
        Value::Object(object) => canonical_members(hash, object, |_, _, _| None),
    }
}

/// Feeds an object's members sorted by key; `special` feeds a member's
/// value its own way when it returns some.
fn canonical_members(
    hash: Fnv,
    object: &Object<'_>,
    special: impl Fn(&str, &Value<'_>, Fnv) -> Option<Fnv>,
) -> Fnv {
    let mut sorted: Vec<_> = object.members().iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let count = sorted.len() as u64;
    sorted.into_iter().fold(
        hash.token(b'{', &count.to_le_bytes()),
        |hash, (key, value)| {
            let hash = hash.token(b'k', key.as_bytes());
            special(key, value, hash).unwrap_or_else(|| canonical(hash, value))
        },
    )
}

#[cfg(test)]
mod tests {
    use crate::event::testing::*;
    use crate::event::*;
    use chrono::{TimeZone, Utc};

    /// The fingerprint of a record that decodes, from the same decode.
    fn fingerprint_of(payload: &[u8], headers: &[Header]) -> i64 {
        decode(Some(payload), headers)
            .expect("a valid event")
            .fingerprint
    }

    /// The sample with its `occurred_at` written as `time` and an extra
    /// member written as `number`, spelled by hand.
    fn spelled(time: &str, number: &str) -> Vec<u8> {
        format!(
            r#"{{"event_id":"6f1c2f8e-3c0b-4f5e-9a59-1d2f0e3b7c11","event_type":"OrderPlaced",
            "schema_version":1,"order_id":"ORD-1001","occurred_at":"{time}","n":{number},
            "lines":[{{"sku":"SKU-42","quantity":2}},{{"sku":"SKU-7","quantity":1}}]}}"#
        )
        .into_bytes()
    }

    #[test]
    fn a_fingerprint_is_of_the_event_not_of_its_formatting() {
        let written = br#"{"event_id":"5d3e0c1e-0000-4000-8000-000000000001","event_type":"OrderPlaced","schema_version":1,"order_id":"O-1","occurred_at":"2026-12-02T12:00:00Z","lines":[{"sku":"A","quantity":2}],"n":null,"ok":true,"ab":"c"}"#;
        let again = br#"{ "ok" : true, "n": null, "lines": [ {"quantity": 2.0, "sku": "\u0041"} ],
            "ab": "c", "schema_version": 1, "order_id": "O-1", "event_type": "OrderPlaced",
            "occurred_at": "2026-12-02T12:00:00Z", "event_id": "5d3e0c1e-0000-4000-8000-000000000001" }"#;
        assert_eq!(fingerprint_of(written, &[]), fingerprint_of(again, &[]));
        let text = std::str::from_utf8(written).unwrap();
        for (from, to) in [
            (r#""quantity":2"#, r#""quantity":3"#),
            (r#""ok":true"#, r#""ok":false"#),
            (r#","ok":true"#, ""),
            // A string is never taken for the number it spells, nor two
            // keys for one.
            (r#""n":null"#, r#""n":"null""#),
            (r#""ab":"c""#, r#""a":"bc""#),
        ] {
            let other = text.replacen(from, to, 1);
            assert_ne!(
                fingerprint_of(written, &[]),
                fingerprint_of(other.as_bytes(), &[]),
                "{other}"
            );
        }
    }

    #[test]
    fn payload_hash_is_stable_and_discriminating() {
        assert_eq!(payload_hash(b""), 0xcbf2_9ce4_8422_2325_u64 as i64);
        assert_eq!(payload_hash(b"a"), 0xaf63_dc4c_8601_ec8c_u64 as i64);
        assert_ne!(payload_hash(b"ab"), payload_hash(b"ba"));
    }

    #[test]
    fn a_structured_fingerprint_is_of_its_data() {
        let written = serde_json::to_vec(&envelope_json()).unwrap();
        // Written out again with other spacing.
        let again = serde_json::to_vec_pretty(&envelope_json()).unwrap();
        assert_eq!(fingerprint_of(&written, &[]), fingerprint_of(&again, &[]));
        // The attributes around the order are not in it; the order is.
        let mut resent = envelope_json();
        resent["source"] = "/shop/retry".into();
        resent["time"] = "2026-12-02T12:00:05Z".into();
        let resent = serde_json::to_vec(&resent).unwrap();
        assert_eq!(fingerprint_of(&written, &[]), fingerprint_of(&resent, &[]));
        let mut other = envelope_json();
        other["data"]["lines"][0]["quantity"] = 3.into();
        assert_ne!(
            fingerprint_of(&written, &[]),
            fingerprint_of(&serde_json::to_vec(&other).unwrap(), &[])
        );
        // The same CloudEvent in binary mode: its value is the data.
        let mut data = envelope_json()["data"].clone();
        let data_bytes = serde_json::to_vec(&data).unwrap();
        let binary_headers = [
            header_of("ce_id", &sample().message_id.to_string()),
            header_of("ce_type", "OrderPlaced"),
            header_of("ce_time", "2026-12-02T12:00:00Z"),
        ];
        assert_eq!(
            fingerprint_of(&written, &[structured_content_type()]),
            fingerprint_of(&data_bytes, &binary_headers)
        );
        // In binary mode all of the value counts.
        data["note"] = "x".into();
        assert_ne!(
            fingerprint_of(&written, &[]),
            fingerprint_of(&serde_json::to_vec(&data).unwrap(), &binary_headers)
        );
    }

    #[test]
    fn ordinary_events_keep_the_fingerprint_ledger_rows_hold() {
        // Computed by the code before fingerprints were of one parse with the
        // decoder: a byte-identical redelivery of an event written as the
        // load generator and `to_json` write it must still be a duplicate.
        let mut millis = sample();
        millis.occurred_at = Utc.timestamp_millis_opt(1_764_676_800_123).unwrap();
        let mut nanos = sample();
        nanos.occurred_at = Utc.timestamp_opt(1_764_676_800, 123_456_789).unwrap();
        let ce_id = [header_of(HEADER_CE_ID, &sample().message_id.to_string())];
        for (event, pinned) in [
            (sample(), 0x4bbe_346b_d9ef_0401_u64),
            (millis, 0xf0ea_78e5_6f24_fd16),
            (nanos, 0xb495_1786_50b6_eca5),
        ] {
            let payload = event.to_json();
            assert_eq!(fingerprint_of(&payload, &[]) as u64, pinned, "{event:?}");
            assert_eq!(fingerprint_of(&payload, &ce_id) as u64, pinned, "{event:?}");
        }
        let envelope = serde_json::to_vec(&envelope_json()).unwrap();
        assert_eq!(fingerprint_of(&envelope, &[]) as u64, 0xc152_3e5a_0c94_eae7);
    }

    #[test]
    fn an_integral_decimal_is_the_integer_to_decoder_and_fingerprint() {
        let written = sample().to_json();
        for (quantity, version) in [("2.0", "1.0"), ("2e0", "1E0"), ("0.2e1", "10e-1")] {
            let text = String::from_utf8(written.clone())
                .unwrap()
                .replacen(r#""quantity":2"#, &format!(r#""quantity":{quantity}"#), 1)
                .replacen(
                    r#""schema_version":1"#,
                    &format!(r#""schema_version":{version}"#),
                    1,
                );
            assert_eq!(decode_event(text.as_bytes(), &[]), Ok(sample()), "{text}");
            assert_eq!(
                fingerprint_of(text.as_bytes(), &[]),
                fingerprint_of(&written, &[]),
                "{text}"
            );
        }
        // A fraction is no quantity.
        let text =
            String::from_utf8(written)
                .unwrap()
                .replacen(r#""quantity":2"#, r#""quantity":2.5"#, 1);
        assert_eq!(
            decode_event(text.as_bytes(), &[]).unwrap_err().reason,
            ParkReason::InvalidField
        );
    }

    #[test]
    fn numbers_are_compared_as_exact_decimals() {
        let time = "2026-12-02T12:00:00Z";
        let same = [
            ("2e18", "2000000000000000000"),
            ("-2E+18", "-2000000000000000000"),
            ("1.5", "1.50"),
            ("1.5", "15e-1"),
            ("0", "-0.0"),
            ("1e300", "1000e297"),
            ("0.1", "0.10"),
        ];
        for (one, other) in same {
            assert_eq!(
                fingerprint_of(&spelled(time, one), &[]),
                fingerprint_of(&spelled(time, other), &[]),
                "{one} and {other}"
            );
        }
        let different = [
            ("9007199254740993.0", "9007199254740992"),
            ("0.1", "0.10000000000000001"),
            ("1e400", "1e401"),
            ("2", "\"2\""),
            ("1.5", "1.25"),
        ];
        for (one, other) in different {
            assert_ne!(
                fingerprint_of(&spelled(time, one), &[]),
                fingerprint_of(&spelled(time, other), &[]),
                "{one} and {other}"
            );
        }
    }

    #[test]
    fn a_re_spelled_event_time_is_the_same_event() {
        let written = spelled("2026-12-02T12:00:00.123Z", "1");
        for again in [
            "2026-12-02T12:00:00.123000Z",
            "2026-12-02T12:00:00.123+00:00",
            "2026-12-02t13:00:00.123+01:00",
            "2026-12-02T06:30:00.123-05:30",
        ] {
            assert_eq!(
                fingerprint_of(&written, &[]),
                fingerprint_of(&spelled(again, "1"), &[]),
                "{again}"
            );
        }
        assert_ne!(
            fingerprint_of(&written, &[]),
            fingerprint_of(&spelled("2026-12-02T12:00:00.124Z", "1"), &[])
        );
        // Only the event time is an instant: another member is its text.
        let other = |text: &str| {
            sample_bytes(|v| {
                v["note"] = text.into();
            })
        };
        assert_ne!(
            fingerprint_of(&other("2026-12-02T12:00:00Z"), &[]),
            fingerprint_of(&other("2026-12-02T12:00:00+00:00"), &[])
        );
    }

    #[test]
    fn an_event_id_is_compared_as_the_uuid_it_names() {
        let written = sample().to_json();
        let upper = sample_bytes(|v| {
            v["event_id"] = sample().message_id.to_string().to_uppercase().into();
        });
        assert_eq!(fingerprint_of(&written, &[]), fingerprint_of(&upper, &[]));
    }
}
