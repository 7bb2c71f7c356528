//! The faults of each chaos scenario, injected while the load runs, and the
//! watch that times the group's recovery from each: from the fault until
//! the group's committed offsets reached the topic's end offsets as of the
//! repair.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::rngs::StdRng;
use rand::Rng;

use super::{ChaosArgs, Scenario, STORM_MEMBERS};
use crate::commands::shell::shell;
use crate::output::chaos_report::Fault;
use crate::probes::group_progress::GroupProgress;
use crate::workload::fleet::Member;

/// Pause between two membership changes of the storm, and between a
/// consumer's recovery and its next kill (drawn uniformly in between).
const FAULT_GAP: (f64, f64) = (2.0, 4.0);

/// Injects one scenario's faults while the load runs.
pub(super) struct Injector<'a> {
    pub(super) args: &'a ChaosArgs,
    pub(super) members: &'a mut Vec<Member>,
    pub(super) progress: &'a GroupProgress,
    pub(super) rng: &'a mut StdRng,
    pub(super) recovery_timeout: Duration,
}

impl Injector<'_> {
    pub(super) async fn inject(
        &mut self,
        scenario: Scenario,
        duration: Duration,
    ) -> Result<Vec<Fault>> {
        let started = Instant::now();
        let mut faults = Vec::new();
        match scenario {
            Scenario::KillConsumer => {
                while started.elapsed() + Duration::from_secs_f64(FAULT_GAP.1) < duration {
                    self.gap().await;
                    let at = Instant::now();
                    let member = &mut self.members[0];
                    member.kill().await?;
                    member.start()?;
                    faults.push(self.recovered("kill -9 consumer", at).await?);
                }
            }
            Scenario::RebalanceStorm | Scenario::RebalanceStormConsumer => {
                let mut watchers = Vec::new();
                let mut change = 0;
                while started.elapsed() + Duration::from_secs_f64(FAULT_GAP.1) < duration {
                    self.gap().await;
                    let at = Instant::now();
                    let member = &mut self.members[(change / 2) % STORM_MEMBERS];
                    let what = if member.is_running() {
                        member.stop().await?;
                        format!("stop {}", member.name)
                    } else {
                        member.start()?;
                        format!("start {}", member.name)
                    };
                    change += 1;
                    watchers.push(self.watch(what, at));
                }
                for member in self.members.iter_mut().filter(|m| !m.is_running()) {
                    member.start()?;
                }
                for watcher in watchers {
                    faults.push(watcher.await??);
                }
            }
            Scenario::RestartDatabase => {
                for nth in 1..=2u32 {
                    sleep_until(started + duration * nth / 3).await;
                    let at = Instant::now();
                    shell(self.args.restart_database_cmd.as_deref()).await?;
                    faults.push(self.recovered("restart PostgreSQL", at).await?);
                }
            }
            Scenario::KillBroker => {
                sleep_until(started + duration / 3).await;
                let at = Instant::now();
                shell(self.args.kill_broker_cmd.as_deref()).await?;
                shell(self.args.start_broker_cmd.as_deref()).await?;
                faults.push(self.recovered("kill -9 broker, start it", at).await?);
            }
            Scenario::KillLeader | Scenario::KillCoordinator => {
                let (command, what) = if scenario == Scenario::KillLeader {
                    (&self.args.kill_leader_cmd, "kill -9 the partitions' leader")
                } else {
                    (
                        &self.args.kill_coordinator_cmd,
                        "kill -9 the group coordinator",
                    )
                };
                sleep_until(started + duration / 3).await;
                shell(command.as_deref()).await?;
                // From the kill: finding the node (a JVM tool for the
                // coordinator) takes seconds before it.
                let at = Instant::now();
                // Recovered with the node still dead: the repair is the
                // cluster's own (an election), not a restart.
                faults.push(self.recovered_supervised(what, at).await?);
                sleep_until(started + duration * 2 / 3).await;
                shell(self.args.start_broker_cmd.as_deref()).await?;
            }
            Scenario::FailoverDatabase => {
                sleep_until(started + duration / 3).await;
                shell(self.args.cut_replica_cmd.as_deref()).await?;
                // What the primary commits from here on, and Kafka's offsets
                // cover, the standby will lack.
                sleep_until(started + duration * 2 / 3).await;
                let at = Instant::now();
                shell(self.args.failover_database_cmd.as_deref()).await?;
                faults.push(
                    self.recovered("kill -9 primary, promote the lagging standby", at)
                        .await?,
                );
            }
            Scenario::Replay => {
                let at = Instant::now();
                self.members[0].rewind_positions().await?;
                self.members[0].start()?;
                faults.push(
                    self.recovered("positions to the earliest offset, new group", at)
                        .await?,
                );
            }
        }
        Ok(faults)
    }

    async fn gap(&mut self) {
        let seconds = self.rng.gen_range(FAULT_GAP.0..FAULT_GAP.1);
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    }

    /// Waits until the group committed the end offsets of now (the repair);
    /// the recovery counts from `at` (the fault).
    async fn recovered(&self, what: &str, at: Instant) -> Result<Fault> {
        self.watch(what.to_owned(), at).await?
    }

    /// `recovered`, while acting as the consumer's supervisor (a
    /// StatefulSet's restart policy): a member that exits on its own (a
    /// fatal Kafka error, e.g. a static member fenced after the
    /// coordinator moved) is started again, and the fault says so.
    async fn recovered_supervised(&mut self, what: &str, at: Instant) -> Result<Fault> {
        let mut watch = self.watch(what.to_owned(), at);
        let mut restarts = 0;
        let mut fault = loop {
            tokio::select! {
                fault = &mut watch => break fault??,
                _ = tokio::time::sleep(Duration::from_millis(200)) => {
                    for member in self.members.iter_mut() {
                        if let Some(exit) = member.exited_unexpectedly() {
                            eprintln!("  {exit}: started again, as its supervisor would");
                            member.start()?;
                            restarts += 1;
                        }
                    }
                }
            }
        };
        if restarts > 0 {
            fault.what = format!("{} ({restarts} consumer restart(s))", fault.what);
        }
        Ok(fault)
    }

    /// The same in the background, for faults that follow each other
    /// faster than the group recovers.
    fn watch(&self, what: String, at: Instant) -> tokio::task::JoinHandle<Result<Fault>> {
        let progress = self.progress.clone();
        let deadline = Instant::now() + self.recovery_timeout;
        let repaired_in = at.elapsed();
        tokio::spawn(async move {
            let ends = progress.end_offsets(deadline).await?;
            let caught_up = progress
                .wait_caught_up(&ends, deadline)
                .await
                .with_context(|| format!("recovering from {what}"))?;
            let fault = Fault {
                repaired_in,
                recovered_in: caught_up - at,
                what,
            };
            eprintln!(
                "  {}: repaired after {:.1} s, recovered in {:.1} s",
                fault.what,
                fault.repaired_in.as_secs_f64(),
                fault.recovered_in.as_secs_f64()
            );
            Ok(fault)
        })
    }
}

async fn sleep_until(at: Instant) {
    tokio::time::sleep_until(at.into()).await;
}
