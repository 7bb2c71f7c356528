//! `inbox-loadgen chaos`: faults under load, each followed by a
//! reconciliation (docs/design.md#load-generator; the fault suite of the service's contract).
//!
//! One run goes through the scenarios in order, on one topic and database.
//! Each one starts its consumers, produces `--scenario-seconds` of the mix at
//! `--rate` while it injects its faults, waits until the group has committed
//! everything, and reconciles what it sent with what the database shows:
//!
//! 1. `kill-consumer`: kill -9 of the consumer at random moments, restarted
//!    at once.
//! 2. `rebalance-storm`: three members in one group; every few seconds one
//!    of them is stopped or started again. `rebalance-storm-consumer` is the
//!    same storm under the consumer group protocol (KIP-848,
//!    `GROUP_PROTOCOL=consumer`) in a group of its own, for the comparison.
//! 3. `restart-database`: PostgreSQL restarted twice (`--restart-database-cmd`).
//! 4. `kill-broker`: kill -9 of the Kafka broker (`--kill-broker-cmd`), then
//!    started again (`--start-broker-cmd`).
//!    On a cluster, `kill-leader` (`--kill-leader-cmd`: the node leading most
//!    of the topic's partitions) and `kill-coordinator`
//!    (`--kill-coordinator-cmd`: the group's coordinator): the group
//!    recovers while the node is still dead (the cluster elects new leaders,
//!    or a new coordinator); the node is started again after the scenario.
//! 5. `replay`: the positions set back to the earliest offsets (`positions
//!    set`), a consumer under a new group re-reads the whole topic from
//!    the earliest offset while the load goes on: everything of scenarios
//!    1–4 arrives again and must change nothing.
//! 6. `failover-database`: the database's asynchronous standby is cut off
//!    from its primary (`--cut-replica-cmd`) while the load goes on, then the
//!    primary is killed with -9 and the standby, which lacks the last
//!    commits, promoted in its place (`--failover-database-cmd`): the
//!    consumer, still running, must read again what the new primary lacks.
//!
//! Time to recover, per fault: from the fault until the group's committed
//! offsets reached the topic's end offsets as of the moment the fault was
//! repaired (the consumer restarted, the database or broker answering
//! again). An offset is committed only after the database commit, so at that
//! instant everything sent before the repair is applied. The outage, from
//! the fault to its repair, is part of it and reported too.
//!
//! The single consumer of scenarios 1 and 3–6 is a static member
//! (`group.instance.id`), as a deployment that restarts consumers in place
//! runs it; the storm's members are dynamic and leave the group when
//! stopped.

mod inject;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::commands::flags::{consumer_binary, consumer_env, Mix, Target};
use crate::commands::settle::settle;
use crate::output;
use crate::output::chaos_report::{self, Outcome};
use crate::probes::database::Database;
use crate::probes::group_progress::GroupProgress;
use crate::workload::fleet::{Member, MemberConfig};
use crate::workload::generate::{Generator, Manifest};
use crate::workload::kafka::Producer;
use crate::workload::produce;

use self::inject::Injector;

/// Members of the rebalance storm's group.
const STORM_MEMBERS: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    KillConsumer,
    RebalanceStorm,
    RebalanceStormConsumer,
    RestartDatabase,
    KillBroker,
    KillLeader,
    KillCoordinator,
    Replay,
    FailoverDatabase,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::KillConsumer => "kill-consumer",
            Scenario::RebalanceStorm => "rebalance-storm",
            Scenario::RebalanceStormConsumer => "rebalance-storm-consumer",
            Scenario::RestartDatabase => "restart-database",
            Scenario::KillBroker => "kill-broker",
            Scenario::KillLeader => "kill-leader",
            Scenario::KillCoordinator => "kill-coordinator",
            Scenario::Replay => "replay",
            Scenario::FailoverDatabase => "failover-database",
        }
    }
}

#[derive(Debug, Args)]
pub struct ChaosArgs {
    #[command(flatten)]
    target: Target,

    #[command(flatten)]
    mix: Mix,

    /// Events per second during every scenario.
    #[arg(long, default_value_t = 1400.0)]
    rate: f64,

    /// Seconds of load per scenario.
    #[arg(long, default_value_t = 30.0)]
    scenario_seconds: f64,

    /// The scenarios to run, in this order.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "kill-consumer,rebalance-storm,restart-database,kill-broker,replay,failover-database"
    )]
    scenarios: Vec<Scenario>,

    /// The service binary [default: inventory-inbox beside this program].
    #[arg(long, value_name = "PATH")]
    consumer_bin: Option<PathBuf>,

    /// Consumer group of the scenarios but the replay [default: TOPIC-chaos].
    #[arg(long)]
    group: Option<String>,

    /// Environment of every consumer, on top of the target's (repeatable).
    #[arg(long = "consumer-env", value_name = "KEY=VALUE")]
    consumer_env: Vec<String>,

    /// First of the consumers' metrics ports (one per member).
    #[arg(long, default_value_t = 9470)]
    metrics_port: u16,

    /// Shell command restarting PostgreSQL; returns once it answers again.
    #[arg(long, value_name = "COMMAND")]
    restart_database_cmd: Option<String>,

    /// Shell command cutting the database's standby off from its primary
    /// (it stops receiving WAL), so that it lacks what follows.
    #[arg(long, value_name = "COMMAND")]
    cut_replica_cmd: Option<String>,

    /// Shell command killing the primary with -9, promoting the standby and
    /// pointing the database's endpoint at it; returns once it answers.
    #[arg(long, value_name = "COMMAND")]
    failover_database_cmd: Option<String>,

    /// Shell command killing the Kafka broker with -9.
    #[arg(long, value_name = "COMMAND")]
    kill_broker_cmd: Option<String>,

    /// Shell command starting the broker; returns once it answers again.
    /// On a cluster: starting whichever node is down.
    #[arg(long, value_name = "COMMAND")]
    start_broker_cmd: Option<String>,

    /// Shell command killing with -9 the node that leads most of the
    /// topic's partitions (a cluster).
    #[arg(long, value_name = "COMMAND")]
    kill_leader_cmd: Option<String>,

    /// Shell command killing with -9 the group's coordinator (a cluster).
    #[arg(long, value_name = "COMMAND")]
    kill_coordinator_cmd: Option<String>,

    /// Longest wait for the group to recover from one fault.
    #[arg(long, default_value_t = 180.0)]
    recovery_timeout: f64,

    /// Where the consumers' logs go.
    #[arg(long, default_value = ".local/chaos")]
    log_dir: PathBuf,

    /// Where the JSON report goes.
    #[arg(long, value_name = "FILE.json")]
    report: Option<PathBuf>,

    /// Seed of the random fault moments [default: drawn and printed].
    #[arg(long)]
    seed: Option<u64>,
}

impl ChaosArgs {
    fn validate(&self) -> Result<()> {
        self.mix.config().validate().map_err(|e| anyhow!(e))?;
        for (flag, value) in [
            ("--rate", self.rate),
            ("--scenario-seconds", self.scenario_seconds),
            ("--recovery-timeout", self.recovery_timeout),
        ] {
            if !(value.is_finite() && value > 0.0) {
                bail!("{flag} must be above 0, not {value}");
            }
        }
        let needs = |scenario: Scenario, flag: &str, value: &Option<String>| {
            if self.scenarios.contains(&scenario) && value.is_none() {
                bail!("scenario {} needs {flag}", scenario.name());
            }
            Ok(())
        };
        needs(
            Scenario::RestartDatabase,
            "--restart-database-cmd",
            &self.restart_database_cmd,
        )?;
        needs(
            Scenario::FailoverDatabase,
            "--cut-replica-cmd",
            &self.cut_replica_cmd,
        )?;
        needs(
            Scenario::FailoverDatabase,
            "--failover-database-cmd",
            &self.failover_database_cmd,
        )?;
        needs(
            Scenario::KillBroker,
            "--kill-broker-cmd",
            &self.kill_broker_cmd,
        )?;
        needs(
            Scenario::KillBroker,
            "--start-broker-cmd",
            &self.start_broker_cmd,
        )?;
        for scenario in [Scenario::KillLeader, Scenario::KillCoordinator] {
            needs(scenario, "--start-broker-cmd", &self.start_broker_cmd)?;
        }
        needs(
            Scenario::KillLeader,
            "--kill-leader-cmd",
            &self.kill_leader_cmd,
        )?;
        needs(
            Scenario::KillCoordinator,
            "--kill-coordinator-cmd",
            &self.kill_coordinator_cmd,
        )?;
        Ok(())
    }

    fn member_config(&self, group: &str, scenario: Scenario) -> Result<MemberConfig> {
        let binary = consumer_binary(self.consumer_bin.as_ref())?;
        let env = consumer_env(&self.consumer_env)?;
        // The consumer protocol's storm: the broker owns session and
        // heartbeat, which the consumer then refuses to be given.
        let env = if scenario == Scenario::RebalanceStormConsumer {
            let mut env: Vec<_> = env
                .into_iter()
                .filter(|(key, _)| {
                    !matches!(
                        key.as_str(),
                        "GROUP_PROTOCOL"
                            | "KAFKA_PROPERTY_SESSION_TIMEOUT_MS"
                            | "KAFKA_PROPERTY_HEARTBEAT_INTERVAL_MS"
                    )
                })
                .collect();
            env.push(("GROUP_PROTOCOL".to_owned(), "consumer".to_owned()));
            env
        } else {
            env
        };
        Ok(MemberConfig {
            binary,
            database_url: self.target.database_url.clone(),
            bootstrap_servers: self.target.bootstrap_servers.clone(),
            topic: self.target.topic.clone(),
            group: group.to_owned(),
            consumer_name: self.target.consumer_name.clone(),
            env,
            log_dir: self.log_dir.clone(),
        })
    }
}

/// What every scenario shares.
struct Run<'a> {
    args: &'a ChaosArgs,
    database: Database,
    skus: Vec<String>,
    generator: Generator,
    rng: StdRng,
    tag: String,
}

pub async fn chaos(args: ChaosArgs) -> Result<bool> {
    args.validate()?;
    let seed = args.seed.unwrap_or_else(rand::random);
    let mix = args.mix.config();
    let skus = mix.sku_names();
    let database = args.target.database(0.0, 0).await?;
    database.seed(&skus).await?;
    let tag = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let mut run = Run {
        args: &args,
        database,
        skus,
        generator: Generator::new(mix, StdRng::seed_from_u64(seed), tag.clone()),
        rng: StdRng::seed_from_u64(seed ^ 0x5eed),
        tag,
    };
    eprintln!(
        "inbox-loadgen chaos (run {}, seed {seed}): {} scenarios of {} s at {}/s on {}",
        run.tag,
        args.scenarios.len(),
        args.scenario_seconds,
        args.rate,
        args.target.topic
    );
    let mut outcomes = Vec::new();
    for &scenario in &args.scenarios {
        eprintln!("--- {} ---", scenario.name());
        let outcome = run
            .scenario(scenario)
            .await
            .with_context(|| format!("scenario {}", scenario.name()))?;
        eprintln!("{}", chaos_report::row(&outcome));
        outcomes.push(outcome);
    }
    println!("{}", chaos_report::table(&outcomes));
    if let Some(path) = &args.report {
        let json = chaos_report::to_json(
            &args.target.topic,
            args.rate,
            args.scenario_seconds,
            seed,
            &outcomes,
        );
        output::write_json(path, &json)?;
        println!("report {}", path.display());
    }
    Ok(outcomes.iter().all(Outcome::ok))
}

impl Run<'_> {
    fn group(&self, scenario: Scenario) -> String {
        let base = self
            .args
            .group
            .clone()
            .unwrap_or_else(|| format!("{}-chaos", self.args.target.topic));
        match scenario {
            Scenario::Replay => format!("{base}-replay-{}", self.tag),
            // A group of its own: one group does not change protocol
            // between scenarios.
            Scenario::RebalanceStormConsumer => format!("{base}-kip848"),
            _ => base,
        }
    }

    fn deadline(&self) -> Instant {
        Instant::now() + Duration::from_secs_f64(self.args.recovery_timeout)
    }

    async fn scenario(&mut self, scenario: Scenario) -> Result<Outcome> {
        let group = self.group(scenario);
        let config = self.args.member_config(&group, scenario)?;
        let port = self.args.metrics_port;
        let mut members: Vec<Member> = match scenario {
            Scenario::RebalanceStorm | Scenario::RebalanceStormConsumer => (0..STORM_MEMBERS)
                .map(|i| Member::new(&config, &format!("storm-{}", i + 1), port + i as u16, None))
                .collect(),
            // One instance id across scenarios: each takes the partitions of
            // the one before at once, as a restarted pod does.
            other => vec![Member::new(&config, other.name(), port, Some("consumer"))],
        };
        let progress = GroupProgress::new(
            &self.args.target.bootstrap_servers,
            &group,
            &self.args.target.topic,
        )
        .await?;
        // What the replay's new group must read again.
        let replayed = match scenario {
            Scenario::Replay => progress.end_offsets(self.deadline()).await?.iter().sum(),
            _ => 0,
        };
        if scenario != Scenario::Replay {
            // The replay's member starts with the load: its start is the fault.
            for member in &mut members {
                member.start()?;
            }
            for member in &mut members {
                member.wait_ready().await?;
            }
        }

        let before = self.database.snapshot(&self.skus).await?;
        let producer =
            Producer::connect(&self.args.target.bootstrap_servers, &self.args.target.topic).await?;
        let mut manifest = Manifest::default();
        let duration = Duration::from_secs_f64(self.args.scenario_seconds);
        let mut injector = Injector {
            args: self.args,
            members: &mut members,
            progress: &progress,
            rng: &mut self.rng,
            recovery_timeout: Duration::from_secs_f64(self.args.recovery_timeout),
        };
        let (produced, faults) = tokio::join!(
            produce::paced(
                &producer,
                &mut self.generator,
                &mut manifest,
                self.args.rate,
                duration,
                None
            ),
            injector.inject(scenario, duration)
        );
        produced?;
        let faults = faults?;
        producer.finish().await?;

        // Everything sent is committed, then reconcile.
        let ends = progress.end_offsets(self.deadline()).await?;
        progress.wait_caught_up(&ends, self.deadline()).await?;
        for member in &mut members {
            if let Some(crash) = member.exited_unexpectedly() {
                bail!("{crash}");
            }
        }
        let settled = settle(
            &self.database,
            &manifest,
            &before,
            &self.skus,
            Duration::from_secs(30),
        )
        .await?;
        for member in &mut members {
            member.stop().await?;
        }
        Ok(Outcome {
            scenario: scenario.name(),
            events: manifest.events_sent(),
            duplicates_sent: manifest.duplicates,
            replayed,
            faults,
            drained: settled.drained,
            reconciliation: settled.reconciliation,
        })
    }
}
