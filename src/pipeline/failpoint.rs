//! Crash and loss points for the tests of what happens between a database
//! commit and its offset commit; inert unless built with the `failpoints`
//! feature.

/// Environment variable naming a fail point, for tests only (read only
/// when built with the `failpoints` feature):
/// - `after_db_commit` aborts the process right after a batch's DB commit,
///   before its offset commit and its DLQ copies;
/// - `drop_first_offset_commit` loses the first offset commit, as if Kafka
///   had refused it;
/// - `fail_first_seek` refuses the first seek of a partition to its
///   position, as if librdkafka had.
const FAILPOINT_ENV: &str = "INBOX_FAILPOINT";

/// The fail point named in [`FAILPOINT_ENV`]; inert without the feature.
pub(super) struct FailPoint {
    name: Option<String>,
    commit_dropped: bool,
}

impl FailPoint {
    pub(super) fn from_env() -> FailPoint {
        FailPoint {
            name: cfg!(feature = "failpoints")
                .then(|| std::env::var(FAILPOINT_ENV).ok())
                .flatten(),
            commit_dropped: false,
        }
    }

    fn is(&self, name: &str) -> bool {
        self.name.as_deref() == Some(name)
    }

    pub(super) fn abort_after_db_commit(&self) {
        if self.is("after_db_commit") {
            tracing::error!("fail point after_db_commit: aborting before the offset commit");
            std::process::abort();
        }
    }

    /// True (once) when this offset commit is to be lost.
    pub(super) fn drop_offset_commit(&mut self) -> bool {
        if self.is("drop_first_offset_commit") && !self.commit_dropped {
            self.commit_dropped = true;
            tracing::error!("fail point drop_first_offset_commit: offset commit not sent");
            return true;
        }
        false
    }
}

/// True (once per process) when a seek is to be refused
/// (`fail_first_seek`); never without the `failpoints` feature.
pub(super) fn seek_fails() -> bool {
    static REFUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    cfg!(feature = "failpoints")
        && std::env::var(FAILPOINT_ENV).is_ok_and(|name| name == "fail_first_seek")
        && !REFUSED.swap(true, std::sync::atomic::Ordering::SeqCst)
}
