//! Errors of the database layer, and which SQLSTATE means what: a table of
//! codes (pure, unit-tested), so that retrying, isolating a record and
//! re-reading the window are decided by code, never by message text.

/// The partitioned ledger, as PostgreSQL names it in errors.
const LEDGER_TABLE: &str = "processed_inbox";

/// Whether a table PostgreSQL names in an error is one day's partition of
/// the ledger (`processed_inbox_p20261207`).
fn is_ledger_day(table: &str) -> bool {
    table
        .strip_prefix(LEDGER_TABLE)
        .and_then(|rest| rest.strip_prefix("_p"))
        .is_some_and(|day| day.len() == 8 && day.bytes().all(|b| b.is_ascii_digit()))
}

/// Errors of the database layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Worth retrying unchanged: connection lost, serialization failure,
    /// deadlock, shutdown, too many connections.
    #[error("database unavailable ({reason}): {message}")]
    Transient {
        reason: RetryReason,
        message: String,
    },
    /// The database refused the data itself; retrying the same data fails
    /// again.
    #[error("database rejected the batch (SQLSTATE {sqlstate}): {message}")]
    Rejected { sqlstate: String, message: String },
    /// The database refused the statements themselves (privileges, a
    /// missing object...): every record would fail alike, so the batch is
    /// retried, never parked, until an operator fixes the cause.
    #[error("database error (SQLSTATE {sqlstate}): {message}")]
    Unexpected { sqlstate: String, message: String },
    /// A record's event day has no ledger partition (dropped or not made
    /// since the window was read): re-read the window and park those
    /// records, never blame the batch.
    #[error("no ledger partition for a record of the batch: {message}")]
    MissingPartition { message: String },
    /// The database's position of a partition is behind the one this
    /// consumer wrote (the database was restored, or failed over to a replica
    /// that lacked the last commits): nothing of the batch committed. The
    /// partitions behind, with the database's position (`None`: it has
    /// none); the consumer reads them again from there.
    #[error("the database's positions are behind this consumer's for {} partition(s)", .0.positions.len())]
    PositionBehind(super::Behind),
    /// A record repeats the id of an earlier record of the statement that
    /// the statement parks (an unknown SKU), with another payload: apply the
    /// records before `ord` (1-based, in the statement) and the rest apart,
    /// so that it is judged as in a later batch. Nothing committed.
    #[error("the batch is applied in two parts, split before record {ord}")]
    SplitBefore { ord: usize },
    /// A concurrent transaction committed a ledger row or a reservation that
    /// the statement's snapshot did not show: run it again. Nothing
    /// committed.
    #[error("a concurrent batch wrote what this batch read: {message}")]
    Raced { message: String },
    /// A batch split in parts failed after some of them committed: the
    /// retry finds what they did (their records' own ledger and parked
    /// rows), and counts it as its own doing.
    #[error("{0} (after part of the batch was applied)")]
    PartlyApplied(Box<StoreError>),
    /// The database does not hold the schema this binary needs.
    #[error("{0}")]
    Schema(String),
    /// The database, or a pooler before it, refuses this service as it is
    /// configured (the login, the database's name, the start-up parameters
    /// or prepared statements of a pool mode it does not have): one line
    /// naming the setting to fix, never retried at start-up.
    #[error("{0}")]
    Refused(String),
    /// Not a source: its message quotes sqlx's, which an error chain would
    /// repeat.
    #[error("migration failed: {0}")]
    Migrate(sqlx::migrate::MigrateError),
}

/// An error of the migrator's own (a migration that does not apply, the
/// migrations table out of step) says so; a database error on the way
/// (connecting, taking the lock) is told as any other.
impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(error: sqlx::migrate::MigrateError) -> Self {
        match error {
            sqlx::migrate::MigrateError::Execute(error) => error.into(),
            other => StoreError::Migrate(other),
        }
    }
}

/// Why a batch is retried: the label of `inbox_db_retries_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryReason {
    SerializationFailure,
    DatabaseTimeout,
    Deadlock,
    TooManyConnections,
    LockNotAvailable,
    QueryCanceled,
    AdminShutdown,
    Connection,
    InsufficientResources,
    PoolTimeout,
    DatabaseError,
    Rejected,
    MissingPartition,
    PositionBehind,
}

impl RetryReason {
    /// Every reason, so that each series exists from the first scrape.
    pub const ALL: [RetryReason; 14] = [
        RetryReason::SerializationFailure,
        RetryReason::DatabaseTimeout,
        RetryReason::Deadlock,
        RetryReason::TooManyConnections,
        RetryReason::LockNotAvailable,
        RetryReason::QueryCanceled,
        RetryReason::AdminShutdown,
        RetryReason::Connection,
        RetryReason::InsufficientResources,
        RetryReason::PoolTimeout,
        RetryReason::DatabaseError,
        RetryReason::Rejected,
        RetryReason::MissingPartition,
        RetryReason::PositionBehind,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryReason::SerializationFailure => "serialization_failure",
            RetryReason::DatabaseTimeout => "database_timeout",
            RetryReason::Deadlock => "deadlock",
            RetryReason::TooManyConnections => "too_many_connections",
            RetryReason::LockNotAvailable => "lock_not_available",
            RetryReason::QueryCanceled => "query_canceled",
            RetryReason::AdminShutdown => "admin_shutdown",
            RetryReason::Connection => "connection",
            RetryReason::InsufficientResources => "insufficient_resources",
            RetryReason::PoolTimeout => "pool_timeout",
            RetryReason::DatabaseError => "database_error",
            RetryReason::Rejected => "rejected",
            RetryReason::MissingPartition => "missing_partition",
            RetryReason::PositionBehind => "position_behind",
        }
    }
}

impl std::fmt::Display for RetryReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl StoreError {
    /// Whether the statement may have committed although this error came
    /// instead of its answer (the connection was cut, or no answer came in
    /// time): a retry then finds what it wrote.
    pub fn answer_may_be_lost(&self) -> bool {
        matches!(
            self,
            StoreError::Transient {
                reason: RetryReason::Connection | RetryReason::DatabaseTimeout,
                ..
            } | StoreError::PartlyApplied(_)
        )
    }

    /// The label of `inbox_db_retries_total{reason}` for a batch that failed
    /// with this error.
    pub fn retry_reason(&self) -> RetryReason {
        match self {
            StoreError::Transient { reason, .. } => *reason,
            StoreError::Unexpected { .. }
            | StoreError::Migrate(_)
            | StoreError::Schema(_)
            | StoreError::Refused(_) => RetryReason::DatabaseError,
            StoreError::Rejected { .. } => RetryReason::Rejected,
            StoreError::MissingPartition { .. } => RetryReason::MissingPartition,
            StoreError::PositionBehind(_) => RetryReason::PositionBehind,
            StoreError::SplitBefore { .. } | StoreError::Raced { .. } => {
                RetryReason::SerializationFailure
            }
            StoreError::PartlyApplied(error) => error.retry_reason(),
        }
    }
}

/// What the service does with a database error, by SQLSTATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Retry the batch unchanged, counted under this reason.
    Retry(RetryReason),
    /// The record's own data: split the batch to isolate it, park it.
    Isolate,
    /// The ledger has no partition for a record's day: re-read the window.
    MissingPartition,
    /// The database went back (restored, failed over): read again from its
    /// positions.
    PositionBehind,
    /// Apply the batch in two statements (see [`StoreError::SplitBefore`]).
    SplitBefore,
    /// Run the statement again at once (see [`StoreError::Raced`]).
    Raced,
    /// The statement itself is refused (privileges, a missing object, a
    /// bug): every record would fail alike, so the batch is retried, never
    /// blamed on the records.
    Unexpected,
}

/// SQLSTATE codes, or classes (two characters), and what they mean here;
/// the first match wins. Codes not listed are [`Verdict::Unexpected`].
const SQLSTATES: [(&str, Verdict); 13] = [
    ("40001", Verdict::Retry(RetryReason::SerializationFailure)),
    ("40P01", Verdict::Retry(RetryReason::Deadlock)),
    ("53300", Verdict::Retry(RetryReason::TooManyConnections)),
    ("55P03", Verdict::Retry(RetryReason::LockNotAvailable)),
    ("57014", Verdict::Retry(RetryReason::QueryCanceled)),
    // The database does not accept connections now (ALLOW_CONNECTIONS
    // false, a maintenance window): like one that is down.
    ("55000", Verdict::Retry(RetryReason::Connection)),
    // inbox_position_behind (migration 20261203000003).
    ("IX001", Verdict::PositionBehind),
    // inbox_refuse (migration 20261204000002).
    ("IX002", Verdict::SplitBefore),
    // Class 57P: operator intervention (admin shutdown, crash shutdown,
    // cannot connect now).
    ("57P", Verdict::Retry(RetryReason::AdminShutdown)),
    // Class 08: connection exceptions.
    ("08", Verdict::Retry(RetryReason::Connection)),
    // Class 53: insufficient resources (disk full, out of memory).
    ("53", Verdict::Retry(RetryReason::InsufficientResources)),
    // Data exceptions and integrity violations belong to the records.
    ("22", Verdict::Isolate),
    ("23", Verdict::Isolate),
];

/// PgBouncer refuses a client for good (a parameter it does not take, an
/// unknown database or user, bad credentials) with SQLSTATE 08P01, the code
/// it also gives what passes (its client limit, a server it cannot reach
/// yet): these refusals are told by PgBouncer's message, which is never
/// translated. A permanent refusal stops the start instead of being retried
/// as a lost connection.
const POOLER_REFUSALS: [&str; 7] = [
    "unsupported startup parameter",
    "no such database",
    "no such user",
    "password authentication failed",
    "SASL authentication failed",
    "server login failed",
    "not allowed",
];

/// Whether an error is a pooler's permanent refusal ([`POOLER_REFUSALS`]).
pub fn is_pooler_refusal(sqlstate: &str, message: &str) -> bool {
    sqlstate == "08P01"
        && POOLER_REFUSALS
            .iter()
            .any(|refusal| message.starts_with(refusal))
}

/// Where docs/deploy.md tells how to set INBOX_DB_POOLER.
const POOLER_DOC: &str = "docs/deploy.md \"Behind a connection pooler\"";

/// The line that names the setting to fix, when the database or a pooler
/// refuses the service as configured; `None` for any other error.
/// PostgreSQL's refusals are told by SQLSTATE, a pooler's by its message
/// ([`POOLER_REFUSALS`]); a prepared statement of sqlx's that exists already,
/// or no longer, on its connection means the server connection is shared
/// with other clients: a pooler that pools transactions.
pub fn refusal(sqlstate: &str, message: &str) -> Option<String> {
    if is_pooler_refusal(sqlstate, message) {
        return Some(if message.starts_with("unsupported startup parameter") {
            format!(
                "INBOX_DB_POOLER: a connection pooler refused what only PostgreSQL itself takes ({message}): set INBOX_DB_POOLER to the pooler's pool mode, session or transaction ({POOLER_DOC})"
            )
        } else {
            format!("DATABASE_URL: the connection pooler refused: {message} (SQLSTATE {sqlstate})")
        });
    }
    // Class 28: invalid authorization (a password, pg_hba.conf); 3D000: no
    // such database.
    if sqlstate.starts_with("28") || sqlstate == "3D000" {
        return Some(format!("DATABASE_URL: {message} (SQLSTATE {sqlstate})"));
    }
    // 42P05 duplicate_prepared_statement, 26000 invalid_sql_statement_name.
    if matches!(sqlstate, "42P05" | "26000") && message.contains("\"sqlx_s_") {
        return Some(format!(
            "INBOX_DB_POOLER: {message}: the server connection is shared with other clients, as by a pooler that pools transactions: set INBOX_DB_POOLER=transaction ({POOLER_DOC})"
        ));
    }
    None
}

/// A TLS handshake that failed because the database's certificate was not
/// trusted (`sslmode=verify-full` or `verify-ca`): one line naming the
/// setting and OpenSSL's reason (e.g. "hostname mismatch", "unable to get
/// local issuer certificate"); `None` for any other TLS failure.
pub fn untrusted_certificate(message: &str) -> Option<String> {
    if !message.contains("certificate verify failed") {
        return None;
    }
    let reason = message
        .rsplit_once('(')
        .and_then(|(_, reason)| reason.strip_suffix(')'))
        .unwrap_or("certificate verify failed");
    Some(format!(
        "DATABASE_URL: the database's TLS certificate is not trusted ({reason}): with \
         sslmode=verify-full it must be signed by a CA of sslrootcert and name the host \
         DATABASE_URL connects to"
    ))
}

/// What to do with an error of this SQLSTATE on this table and constraint
/// (as the server reports them: never by message text, which depends on
/// the server's language).
pub fn classify(sqlstate: &str, table: Option<&str>, constraint: Option<&str>) -> Verdict {
    // A check violation on the ledger with no constraint named is its
    // partition routing: no partition holds the row's day.
    if sqlstate == "23514" && table == Some(LEDGER_TABLE) && constraint.is_none() {
        return Verdict::MissingPartition;
    }
    // A ledger row that is there already: the batch function writes only
    // the rows its look-up did not find, so a concurrent batch committed it
    // since (migration 20261207002001).
    if sqlstate == "23505" && table.is_some_and(is_ledger_day) {
        return Verdict::Raced;
    }
    SQLSTATES
        .iter()
        .find(|(code, _)| sqlstate.starts_with(code))
        .map_or(Verdict::Unexpected, |(_, verdict)| *verdict)
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        let transient = |reason| StoreError::Transient {
            reason,
            message: error.to_string(),
        };
        match &error {
            sqlx::Error::Database(db) => {
                let sqlstate = db.code().map(|c| c.into_owned()).unwrap_or_default();
                let message = db.message().to_owned();
                if let Some(refused) = refusal(&sqlstate, &message) {
                    return StoreError::Refused(refused);
                }
                match classify(&sqlstate, db.table(), db.constraint()) {
                    Verdict::Retry(reason) => transient(reason),
                    // Which partitions, the inbox finds out.
                    Verdict::PositionBehind => StoreError::PositionBehind(Default::default()),
                    Verdict::MissingPartition => StoreError::MissingPartition { message },
                    Verdict::SplitBefore => {
                        let detail = db
                            .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                            .and_then(|e| e.detail())
                            .and_then(|d| d.parse().ok());
                        match detail {
                            Some(ord) => StoreError::SplitBefore { ord },
                            None => StoreError::Unexpected { sqlstate, message },
                        }
                    }
                    Verdict::Raced => StoreError::Raced { message },
                    Verdict::Isolate => StoreError::Rejected { sqlstate, message },
                    Verdict::Unexpected => StoreError::Unexpected { sqlstate, message },
                }
            }
            sqlx::Error::PoolTimedOut => transient(RetryReason::PoolTimeout),
            sqlx::Error::Tls(tls) => match untrusted_certificate(&tls.to_string()) {
                Some(refused) => StoreError::Refused(refused),
                None => transient(RetryReason::Connection),
            },
            sqlx::Error::Io(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => transient(RetryReason::Connection),
            _ => StoreError::Unexpected {
                sqlstate: String::new(),
                message: error.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transient_error_says_its_reason_as_the_retries_metric_labels_it() {
        for reason in RetryReason::ALL {
            let error = StoreError::Transient {
                reason,
                message: "the server closed the connection".into(),
            };
            assert_eq!(
                error.to_string(),
                format!(
                    "database unavailable ({}): the server closed the connection",
                    reason.as_str()
                )
            );
        }
    }

    #[test]
    fn an_untrusted_certificate_is_one_line_with_openssls_reason() {
        let failed = "error:0A000086:SSL routines:tls_post_process_server_certificate:\
                      certificate verify failed:../ssl/statem/statem_clnt.c:1889: (hostname mismatch)";
        let line = untrusted_certificate(failed).expect("refused");
        assert!(
            line.starts_with(
                "DATABASE_URL: the database's TLS certificate is not trusted (hostname mismatch)"
            ),
            "{line}"
        );
        assert_eq!(untrusted_certificate("unexpected EOF while reading"), None);
    }

    #[test]
    fn transient_codes_are_retried_under_their_reason() {
        for (sqlstate, reason) in [
            ("40001", "serialization_failure"),
            ("40P01", "deadlock"),
            ("53300", "too_many_connections"),
            ("53100", "insufficient_resources"),
            ("55P03", "lock_not_available"),
            ("57014", "query_canceled"),
            ("57P01", "admin_shutdown"),
            ("57P03", "admin_shutdown"),
            ("08006", "connection"),
            ("55000", "connection"),
        ] {
            assert!(
                matches!(classify(sqlstate, None, None), Verdict::Retry(r) if r.as_str() == reason),
                "{sqlstate}"
            );
        }
    }

    #[test]
    fn a_records_own_data_is_isolated() {
        for sqlstate in ["22P05", "22001", "23505", "23514"] {
            assert_eq!(
                classify(sqlstate, Some("inbox_parked"), Some("c")),
                Verdict::Isolate,
                "{sqlstate}"
            );
        }
    }

    #[test]
    fn a_missing_ledger_partition_is_told_by_code_table_and_no_constraint() {
        assert_eq!(
            classify("23514", Some(LEDGER_TABLE), None),
            Verdict::MissingPartition
        );
        // A named CHECK constraint on the ledger is the data's fault.
        assert_eq!(
            classify("23514", Some(LEDGER_TABLE), Some("processed_inbox_check")),
            Verdict::Isolate
        );
        assert_eq!(
            classify("23514", Some("inventory_stock"), None),
            Verdict::Isolate
        );
    }

    #[test]
    fn a_poolers_permanent_refusal_is_not_a_lost_connection() {
        for message in [
            "unsupported startup parameter: options",
            "unsupported startup parameter: extra_float_digits",
            "no such database: nowhere",
            "password authentication failed",
        ] {
            assert!(is_pooler_refusal("08P01", message), "{message}");
        }
        for message in [
            "no more connections allowed (max_client_conn)",
            "query_wait_timeout",
            "server login has been failing, try again later (server_login_retry)",
            "pgbouncer cannot connect to server",
        ] {
            assert!(!is_pooler_refusal("08P01", message), "{message}");
        }
        assert!(!is_pooler_refusal("08006", "no such database: x"));
    }

    #[test]
    fn a_refusal_names_the_setting_to_fix() {
        for (sqlstate, message, setting, quoted) in [
            (
                "08P01",
                "unsupported startup parameter: extra_float_digits",
                "INBOX_DB_POOLER:",
                "session or transaction",
            ),
            (
                "08P01",
                "no such database: nowhere",
                "DATABASE_URL:",
                "no such database: nowhere",
            ),
            (
                "28P01",
                "password authentication failed for user \"inventory\"",
                "DATABASE_URL:",
                "password authentication failed",
            ),
            (
                "3D000",
                "database \"nowhere\" does not exist",
                "DATABASE_URL:",
                "does not exist",
            ),
            (
                "42P05",
                "prepared statement \"sqlx_s_1\" already exists",
                "INBOX_DB_POOLER:",
                "INBOX_DB_POOLER=transaction",
            ),
            (
                "26000",
                "prepared statement \"sqlx_s_3\" does not exist",
                "INBOX_DB_POOLER:",
                "INBOX_DB_POOLER=transaction",
            ),
        ] {
            let line = refusal(sqlstate, message).unwrap_or_default();
            assert!(
                line.starts_with(setting) && line.contains(quoted),
                "{sqlstate}: {line}"
            );
        }
        assert_eq!(
            refusal("42P05", "prepared statement \"mine\" already exists"),
            None
        );
        assert_eq!(refusal("42501", "permission denied for table x"), None);
    }

    #[test]
    fn a_lost_connection_or_a_full_pool_is_retried_and_may_have_committed() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        for (error, reason, maybe_committed) in [
            (sqlx::Error::Io(io), "connection", true),
            (sqlx::Error::PoolClosed, "connection", true),
            (sqlx::Error::WorkerCrashed, "connection", true),
            (sqlx::Error::Protocol("cut".into()), "connection", true),
            (sqlx::Error::PoolTimedOut, "pool_timeout", false),
        ] {
            let store = StoreError::from(error);
            assert!(
                matches!(store, StoreError::Transient { reason: r, .. } if r.as_str() == reason),
                "{store:?}"
            );
            assert_eq!(store.retry_reason().as_str(), reason);
            assert_eq!(store.answer_may_be_lost(), maybe_committed, "{store:?}");
        }
        let timeout = StoreError::Transient {
            reason: RetryReason::DatabaseTimeout,
            message: String::new(),
        };
        assert!(timeout.answer_may_be_lost());
        // Anything else sqlx says is unexpected: retried, never parked.
        let other = StoreError::from(sqlx::Error::RowNotFound);
        assert!(matches!(other, StoreError::Unexpected { .. }), "{other:?}");
        assert!(!other.answer_may_be_lost());
    }

    #[test]
    fn every_error_is_counted_under_an_exposed_reason() {
        let text = String::new;
        for (error, reason) in [
            (
                StoreError::Unexpected {
                    sqlstate: "42501".into(),
                    message: text(),
                },
                "database_error",
            ),
            (StoreError::Schema(text()), "database_error"),
            (StoreError::Refused(text()), "database_error"),
            (
                StoreError::Rejected {
                    sqlstate: "22P05".into(),
                    message: text(),
                },
                "rejected",
            ),
            (
                StoreError::MissingPartition { message: text() },
                "missing_partition",
            ),
            (
                StoreError::PositionBehind(Default::default()),
                "position_behind",
            ),
            (StoreError::SplitBefore { ord: 3 }, "serialization_failure"),
            (
                StoreError::Raced { message: text() },
                "serialization_failure",
            ),
        ] {
            assert_eq!(error.retry_reason().as_str(), reason, "{error:?}");
            assert!(!error.answer_may_be_lost(), "{error:?}");
        }
    }

    #[test]
    fn every_reason_has_its_own_label() {
        let labels: std::collections::BTreeSet<&str> =
            RetryReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(labels.len(), RetryReason::ALL.len());
        assert!(labels
            .iter()
            .all(|l| l.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
    }

    #[test]
    fn a_ledger_row_there_already_is_a_race_and_another_key_the_records() {
        let day = Some("processed_inbox_p20261207");
        let key = Some("processed_inbox_p20261207_pkey");
        assert_eq!(classify("23505", day, key), Verdict::Raced);
        for table in [
            "processed_inbox",
            "processed_inbox_p2026120",
            "inbox_parked_p20261207",
        ] {
            assert_eq!(
                classify("23505", Some(table), None),
                Verdict::Isolate,
                "{table}"
            );
        }
        assert_eq!(classify("23514", day, None), Verdict::Isolate);
    }

    #[test]
    fn a_database_gone_back_and_anything_else() {
        assert_eq!(classify("IX001", None, None), Verdict::PositionBehind);
        assert_eq!(classify("IX002", None, None), Verdict::SplitBefore);
        assert_eq!(classify("IX003", None, None), Verdict::Unexpected);
        for sqlstate in ["42501", "42883", "XX000", ""] {
            assert_eq!(
                classify(sqlstate, None, None),
                Verdict::Unexpected,
                "{sqlstate:?}"
            );
        }
    }
}
