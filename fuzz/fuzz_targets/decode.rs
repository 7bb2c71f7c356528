//! Fuzzes decoding and validation: arbitrary payload bytes, with a `ce_id`
//! and a `ce_time` header cut from the same input and a CloudEvents
//! structured-mode `content-type`, must never panic, and a valid event must
//! re-encode to something that decodes to itself.
#![no_main]

use inventory_inbox::event::{decode, Header};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte chooses which headers the record carries; the header
    // values of ce_id and ce_time are short slices of the input itself.
    let (selector, payload) = data.split_first().unwrap_or((&0, &[]));
    let mut headers = Vec::new();
    if selector & 1 == 1 {
        headers.push(Header {
            key: "ce_id".into(),
            value: Some(payload.iter().take(36).copied().collect()),
        });
    }
    if selector & 2 == 2 {
        headers.push(Header {
            key: "ce_time".into(),
            value: Some(payload.iter().rev().take(24).copied().collect()),
        });
    }
    if selector & 4 == 4 {
        headers.push(Header {
            key: "content-type".into(),
            value: Some(b"application/cloudevents+json".to_vec()),
        });
    }
    if let Ok(decoded) = decode(Some(payload), &headers) {
        let again =
            decode(Some(&decoded.event.to_json()), &[]).expect("a re-encoded valid event is valid");
        assert_eq!(again.event, decoded.event);
    }
});
