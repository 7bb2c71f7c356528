//! The end of every load, shared by `run` and each `chaos` scenario: wait
//! until the consumer has applied or parked every record sent (or the
//! timeout passed), read the database back, and reconcile it against what
//! was sent. The probe reads, the verdict judges; this puts them in order.

use std::time::Duration;

use anyhow::Result;

use crate::probes::database::Database;
use crate::verdict::reconcile::{reconcile, AppliedRow, Reconciliation, Sent, Snapshot};
use crate::workload::generate::Manifest;

/// What the database shows once a run's records are in.
pub struct Settled {
    /// Whether every record was applied or parked before the timeout.
    pub drained: bool,
    /// The ledger rows of the run's unique events.
    pub applied: Vec<AppliedRow>,
    pub reconciliation: Reconciliation,
}

/// Waits until every record of `manifest` is applied or parked (or
/// `timeout` passed), then reconciles the database against `before`.
pub async fn settle(
    database: &Database,
    manifest: &Manifest,
    before: &Snapshot,
    skus: &[String],
    timeout: Duration,
) -> Result<Settled> {
    let expected = (manifest.unique_events() + manifest.poison_sent()) as i64;
    let drained = database
        .wait_for_drain(before, expected, manifest.events_sent() as i64, timeout)
        .await?;
    let after = database.snapshot(skus).await?;
    let unique_ids = manifest.fresh_ids();
    let applied = database.applied(&unique_ids).await?;
    let reconciliation = reconcile(
        &Sent {
            unique_ids: &unique_ids,
            expected_reserved: &manifest.expected_reserved,
            poison: &manifest.poison,
        },
        before,
        &after,
        &applied,
    );
    Ok(Settled {
        drained,
        applied,
        reconciliation,
    })
}
