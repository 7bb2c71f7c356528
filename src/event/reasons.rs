//! Why a record is parked: the reason codes of docs/design.md#outcomes
//! ([`ParkReason`]) and the rejection that carries one, with its detail and
//! the record's id when it could be read.

use std::fmt;

use uuid::Uuid;

/// Why a record was parked instead of applied (docs/design.md#outcomes). The string forms are
/// the reason codes stored in `inbox_parked.reason` and used as metric labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParkReason {
    MalformedJson,
    MissingEventId,
    InvalidEventId,
    EventIdMismatch,
    MissingEventTime,
    UnsupportedEventType,
    UnsupportedSchemaVersion,
    InvalidField,
    PayloadTooLarge,
    UnknownSku,
    OutsideDedupWindow,
    EventTimeInFuture,
    EventIdConflict,
    DbRejected,
}

impl ParkReason {
    /// Every reason, in the order of docs/design.md#outcomes.
    pub const ALL: [ParkReason; 14] = [
        ParkReason::MalformedJson,
        ParkReason::MissingEventId,
        ParkReason::InvalidEventId,
        ParkReason::EventIdMismatch,
        ParkReason::MissingEventTime,
        ParkReason::UnsupportedEventType,
        ParkReason::UnsupportedSchemaVersion,
        ParkReason::InvalidField,
        ParkReason::PayloadTooLarge,
        ParkReason::UnknownSku,
        ParkReason::OutsideDedupWindow,
        ParkReason::EventTimeInFuture,
        ParkReason::EventIdConflict,
        ParkReason::DbRejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ParkReason::MalformedJson => "malformed_json",
            ParkReason::MissingEventId => "missing_event_id",
            ParkReason::InvalidEventId => "invalid_event_id",
            ParkReason::EventIdMismatch => "event_id_mismatch",
            ParkReason::MissingEventTime => "missing_event_time",
            ParkReason::UnsupportedEventType => "unsupported_event_type",
            ParkReason::UnsupportedSchemaVersion => "unsupported_schema_version",
            ParkReason::InvalidField => "invalid_field",
            ParkReason::PayloadTooLarge => "payload_too_large",
            ParkReason::UnknownSku => "unknown_sku",
            ParkReason::OutsideDedupWindow => "outside_dedup_window",
            ParkReason::EventTimeInFuture => "event_time_in_future",
            ParkReason::EventIdConflict => "event_id_conflict",
            ParkReason::DbRejected => "db_rejected",
        }
    }

    /// The reason for a code as stored in the database.
    pub fn from_code(code: &str) -> Option<ParkReason> {
        ParkReason::ALL.into_iter().find(|r| r.as_str() == code)
    }
}

impl fmt::Display for ParkReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A record that cannot be applied: the reason code, a human explanation, and
/// the message id when one could be read (parked rows keep it for search).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: ParkReason,
    pub detail: String,
    pub message_id: Option<Uuid>,
}

impl Rejection {
    pub(super) fn new(reason: ParkReason, detail: impl Into<String>) -> Self {
        Rejection {
            reason,
            detail: detail.into(),
            message_id: None,
        }
    }

    /// This rejection naming `id` when it names none yet.
    pub(super) fn naming(self, id: Option<Uuid>) -> Self {
        Rejection {
            message_id: self.message_id.or(id),
            ..self
        }
    }
}

/// Keeps parking details short when a producer sends something huge.
pub(super) fn truncate(text: &str) -> &str {
    match text.char_indices().nth(64) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use crate::event::*;

    #[test]
    fn every_reason_has_a_distinct_code() {
        let codes: HashSet<_> = ParkReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(codes.len(), ParkReason::ALL.len());
        for reason in ParkReason::ALL {
            assert_eq!(ParkReason::from_code(reason.as_str()), Some(reason));
            // Log lines name a reason by its code, as the table stores it.
            assert_eq!(reason.to_string(), reason.as_str());
        }
        assert_eq!(ParkReason::from_code("no_such_reason"), None);
    }
}
