//! A replay of a group too large for one request (more than
//! [`IN_REQUEST`] records): it runs beside the requests, one record at a
//! time through [`store::replay`] (each its own transaction, as the CLI's),
//! and the console shows its progress on `/parked/replaying` until it ends.
//!
//! Invariants:
//! - One at a time: while one runs, another is refused and says where the
//!   running one stands.
//! - Joined, never detached: the console's end stops it between two records
//!   (what was replayed stays replayed; the rest stays parked, eligible) and
//!   waits for it.
//! - A failure stops it, as in a request; the record that failed and why are
//!   shown.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use tokio::task::JoinSet;

use crate::store::{self, DbPool, ReplayOutcome};

/// Records a replay takes within its request; a group of more runs beside.
pub const IN_REQUEST: usize = 500;
/// Records still parked after their replay named on the progress page.
const STILL_PARKED_NAMED: usize = 50;

/// The group replays of a console: the last one, and the task running it.
#[derive(Default)]
pub struct GroupReplays {
    last: Mutex<Option<Arc<GroupReplay>>>,
    running: Mutex<JoinSet<()>>,
}

/// One group replay and where it stands.
pub struct GroupReplay {
    /// What was asked, in words ("every unreplayed record of reason …").
    pub group: String,
    /// The records it replays, in order.
    pub total: usize,
    pub started_at: DateTime<Utc>,
    /// Where it was asked from.
    pub by: String,
    progress: Mutex<Progress>,
    /// Set by the console's end: stop before the next record.
    stop: AtomicBool,
}

/// Where a group replay stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    pub replayed: usize,
    pub applied: usize,
    pub duplicate: usize,
    pub still_parked: usize,
    /// The first [`STILL_PARKED_NAMED`] records still parked, and why.
    pub still_parked_named: Vec<(i64, String)>,
    /// The record whose replay failed, and why: the rest were not replayed.
    pub failed: Option<(i64, String)>,
    /// Set when it ended (done, failed or stopped).
    pub finished_at: Option<DateTime<Utc>>,
    /// It ended because the console stopped.
    pub stopped: bool,
}

impl GroupReplay {
    pub fn progress(&self) -> Progress {
        self.progress.lock().expect("progress").clone()
    }

    fn record(&self, id: i64, outcome: Result<ReplayOutcome, String>) {
        let mut p = self.progress.lock().expect("progress");
        match outcome {
            Ok(outcome) => {
                p.replayed += 1;
                match outcome {
                    ReplayOutcome::Applied => p.applied += 1,
                    ReplayOutcome::Duplicate => p.duplicate += 1,
                    ReplayOutcome::StillParked(..) => {
                        p.still_parked += 1;
                        if p.still_parked_named.len() < STILL_PARKED_NAMED {
                            p.still_parked_named.push((id, outcome.to_string()));
                        }
                    }
                    ReplayOutcome::AlreadyReplayed(_) | ReplayOutcome::NotFound => {}
                }
            }
            Err(why) => p.failed = Some((id, why)),
        }
    }

    fn finish(&self, stopped: bool) {
        let mut p = self.progress.lock().expect("progress");
        p.finished_at = Some(Utc::now());
        p.stopped = stopped;
    }
}

impl GroupReplays {
    /// The last group replay, running or ended.
    pub fn last(&self) -> Option<Arc<GroupReplay>> {
        self.last.lock().expect("group replays").clone()
    }

    /// Starts replaying `ids` beside the requests, or returns the one that
    /// runs still.
    pub fn start(
        &self,
        pool: DbPool,
        consumer: String,
        ids: Vec<i64>,
        group: String,
        by: String,
    ) -> Result<Arc<GroupReplay>, Arc<GroupReplay>> {
        let mut last = self.last.lock().expect("group replays");
        if let Some(running) = last.as_ref().filter(|r| r.progress().finished_at.is_none()) {
            return Err(running.clone());
        }
        let job = Arc::new(GroupReplay {
            group,
            total: ids.len(),
            started_at: Utc::now(),
            by,
            progress: Mutex::new(Progress::default()),
            stop: AtomicBool::new(false),
        });
        *last = Some(job.clone());
        let mut running = self.running.lock().expect("group replay task");
        while running.try_join_next().is_some() {}
        let task = job.clone();
        running.spawn(async move { replay_all(&pool, &consumer, &ids, &task).await });
        Ok(job)
    }

    /// Stops the running replay before its next record and waits for it.
    pub async fn stop(&self) {
        if let Some(job) = self.last() {
            job.stop.store(true, Ordering::Relaxed);
        }
        let mut running = std::mem::take(&mut *self.running.lock().expect("group replay task"));
        while running.join_next().await.is_some() {}
    }
}

async fn replay_all(pool: &DbPool, consumer: &str, ids: &[i64], job: &GroupReplay) {
    for id in ids {
        if job.stop.load(Ordering::Relaxed) {
            tracing::warn!(group = %job.group, progress = ?job.progress(), "console: a group replay was stopped by the console's end; the rest stays parked");
            job.finish(true);
            return;
        }
        match store::replay(pool, consumer, *id, &job.by).await {
            Ok(outcome) => job.record(*id, Ok(outcome)),
            Err(error) => {
                job.record(*id, Err(error.to_string()));
                break;
            }
        }
    }
    job.finish(false);
    tracing::info!(
        action = "replay",
        group = %job.group,
        by = %job.by,
        records = job.total,
        progress = ?job.progress(),
        "console: a group replay ended"
    );
}
