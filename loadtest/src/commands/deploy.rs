//! `inbox-loadgen deploy`: deploys under load (`make bench-deploy`,
//! docs/deploy.md#deploys-under-load).
//!
//! A group of `--members` real consumers, configured as a variant says (how
//! `deploy/` runs them, or an alternative), takes paced load on one topic
//! and database while the run does what a Kubernetes StatefulSet does to it:
//!
//! - `baseline`: nothing; the same load, for the comparison.
//! - `roll`: a rolling update with `podManagementPolicy: OrderedReady`,
//!   highest ordinal first: SIGTERM, the pod-start gap (`--gaps`, the time
//!   a new pod takes to be scheduled and start), the member started again
//!   under the same name, and the next one only once it is ready
//!   (`/readyz`), at least `--roll-every` seconds after the one before.
//! - `scale`: scale-out to `--scale-to` members, one at a time, each ready
//!   before the next; then back, highest ordinal first, each stopped before
//!   the next.
//!
//! Every phase is its own load of `--phase-seconds`, drained and reconciled
//! (0 lost, 0 applied twice) before the next; its end-to-end latency (send
//! → ledger row) is reported over the whole phase (after `--warmup`) and
//! over the disruption's window (first action → last action's end + 1 s).
//! Variants alternate, round after round (`--rounds`), so that the old and
//! the new are measured side by side on the same machine at the same time.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::commands::flags::{consumer_binary, consumer_env, Mix, Target};
use crate::commands::settle::settle;
use crate::output;
use crate::output::deploy_report::{Action, Outcome};
use crate::probes::database::Database;
use crate::verdict::latency::{self, quantiles, Latencies, Sample};
use crate::workload::fleet::{Member, MemberConfig};
use crate::workload::generate::{Generator, Manifest};
use crate::workload::kafka::Producer;
use crate::workload::produce;

/// What a phase does to the group while the load runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Phase {
    Baseline,
    Roll,
    Scale,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Baseline => "baseline",
            Phase::Roll => "roll",
            Phase::Scale => "scale",
        }
    }
}

/// How the members of one variant are configured.
#[derive(Debug, Clone)]
pub struct Variant {
    pub name: String,
    /// `group.instance.id` per member (the pod's name), as a StatefulSet
    /// with static membership gives it.
    pub static_members: bool,
    pub env: Vec<(String, String)>,
    /// Roll only with these gaps (`gaps=2,10`); every `--gaps` otherwise.
    pub gaps: Option<Vec<f64>>,
}

impl std::str::FromStr for Variant {
    type Err = anyhow::Error;

    /// `NAME static|dynamic [gaps=G,G…] [KEY=VALUE …]`, apart by spaces.
    fn from_str(spec: &str) -> Result<Variant> {
        let mut words = spec.split_whitespace();
        let name = words
            .next()
            .ok_or_else(|| anyhow!("--variant {spec:?}: no name"))?;
        let static_members = match words.next() {
            Some("static") => true,
            Some("dynamic") => false,
            other => {
                bail!("--variant {spec:?}: the second word is static or dynamic, not {other:?}")
            }
        };
        let mut gaps = None;
        let mut env = Vec::new();
        for word in words {
            match word.split_once('=') {
                Some(("gaps", list)) => {
                    gaps = Some(
                        list.split(',')
                            .map(|gap| gap.parse::<f64>())
                            .collect::<Result<Vec<_>, _>>()
                            .with_context(|| format!("--variant {spec:?}: gaps={list}"))?,
                    )
                }
                Some(_) => env.extend(consumer_env(&[word.to_owned()])?),
                None => bail!("--variant {spec:?}: {word:?} is not KEY=VALUE"),
            }
        }
        Ok(Variant {
            name: name.to_owned(),
            static_members,
            env,
            gaps,
        })
    }
}

#[derive(Debug, Args)]
pub struct DeployArgs {
    #[command(flatten)]
    target: Target,

    #[command(flatten)]
    mix: Mix,

    /// Events per second in every phase.
    #[arg(long, default_value_t = 1400.0)]
    rate: f64,

    /// Seconds of load per phase.
    #[arg(long, default_value_t = 90.0)]
    phase_seconds: f64,

    /// Seconds at the start of each phase left out of its whole-phase
    /// latency (members just started); still reconciled.
    #[arg(long, default_value_t = 5.0)]
    warmup: f64,

    /// Members of the group (the StatefulSet's replicas).
    #[arg(long, default_value_t = 3)]
    members: usize,

    /// Members at the top of the scale phase.
    #[arg(long, default_value_t = 6)]
    scale_to: usize,

    /// Seconds into a phase when its first action comes.
    #[arg(long, default_value_t = 10.0)]
    first_action_at: f64,

    /// Shortest time between two members' restarts, and how long the
    /// scaled-out group runs before it is scaled back.
    #[arg(long, default_value_t = 20.0)]
    roll_every: f64,

    /// Pod-start gaps of the roll, seconds from a member's exit to its new
    /// start; one roll phase each.
    #[arg(long, value_delimiter = ',', default_value = "2")]
    gaps: Vec<f64>,

    /// The phases, in this order, for each variant.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "baseline,roll,scale"
    )]
    phases: Vec<Phase>,

    /// A configuration of the members: `NAME static|dynamic [gaps=G,…]
    /// [KEY=VALUE …]` (repeatable; the variants alternate).
    #[arg(long = "variant", required = true)]
    variants: Vec<Variant>,

    /// Times every variant runs its phases, alternating with the others.
    #[arg(long, default_value_t = 1)]
    rounds: usize,

    /// The service binary [default: inventory-inbox beside this program].
    #[arg(long, value_name = "PATH")]
    consumer_bin: Option<PathBuf>,

    /// Environment of every member, under each variant's (repeatable).
    #[arg(long = "consumer-env", value_name = "KEY=VALUE")]
    consumer_env: Vec<String>,

    /// First of the members' metrics ports (one per member; `chaos` and
    /// `explore` start at 9470 and 9480).
    #[arg(long, default_value_t = 9530)]
    metrics_port: u16,

    /// Seconds to wait for the group to apply a phase's load after it.
    #[arg(long, default_value_t = 120.0)]
    drain_timeout: f64,

    /// Where the members' logs go.
    #[arg(long, default_value = ".local/bench/deploy")]
    log_dir: PathBuf,

    /// Where the JSON report goes.
    #[arg(long, value_name = "FILE.json")]
    report: Option<PathBuf>,
}

impl DeployArgs {
    fn validate(&self) -> Result<()> {
        self.mix.config().validate().map_err(|e| anyhow!(e))?;
        for (flag, value) in [
            ("--rate", self.rate),
            ("--phase-seconds", self.phase_seconds),
            ("--roll-every", self.roll_every),
            ("--drain-timeout", self.drain_timeout),
        ] {
            if !(value.is_finite() && value > 0.0) {
                bail!("{flag} must be above 0, not {value}");
            }
        }
        if !(0.0..self.phase_seconds).contains(&self.first_action_at) {
            bail!("--first-action-at must fall within --phase-seconds");
        }
        if self.members == 0 || self.scale_to < self.members {
            bail!("--members must be at least 1 and --scale-to at least --members");
        }
        if self.rounds == 0 {
            bail!("--rounds must be at least 1");
        }
        Ok(())
    }

    fn member_config(&self, variant: &Variant) -> Result<MemberConfig> {
        let mut env = consumer_env(&self.consumer_env)?;
        env.extend(variant.env.iter().cloned());
        Ok(MemberConfig {
            binary: consumer_binary(self.consumer_bin.as_ref())?,
            database_url: self.target.database_url.clone(),
            bootstrap_servers: self.target.bootstrap_servers.clone(),
            topic: self.target.topic.clone(),
            group: format!("{}-{}", self.target.topic, variant.name),
            consumer_name: self.target.consumer_name.clone(),
            env,
            log_dir: self.log_dir.clone(),
        })
    }

    /// The phases one variant runs in a round, with the gap of each roll.
    fn plan(&self, variant: &Variant) -> Vec<(Phase, Option<f64>)> {
        let gaps = variant.gaps.as_ref().unwrap_or(&self.gaps);
        self.phases
            .iter()
            .flat_map(|&phase| match phase {
                Phase::Roll => gaps.iter().map(|&gap| (phase, Some(gap))).collect(),
                other => vec![(other, None)],
            })
            .collect()
    }
}

pub async fn deploy(args: DeployArgs) -> Result<bool> {
    args.validate()?;
    let mix = args.mix.config();
    let skus = mix.sku_names();
    let phases_per_variant: usize = args.variants.iter().map(|v| args.plan(v).len()).sum();
    let run_seconds =
        (args.phase_seconds + args.drain_timeout) * (phases_per_variant * args.rounds) as f64;
    let database = args
        .target
        .database(run_seconds, args.mix.event_day_offset)
        .await?;
    database.seed(&skus).await?;
    let seed = rand::random();
    let tag = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let mut generator = Generator::new(mix, StdRng::seed_from_u64(seed), tag.clone());
    eprintln!(
        "inbox-loadgen deploy (run {tag}): {} variants x {} rounds, {} members, {} s phases at {}/s on {}",
        args.variants.len(),
        args.rounds,
        args.members,
        args.phase_seconds,
        args.rate,
        args.target.topic
    );
    let mut outcomes = Vec::new();
    for round in 1..=args.rounds {
        for variant in &args.variants {
            let mut group = Group::start(&args, variant).await?;
            for (phase, gap) in args.plan(variant) {
                eprintln!(
                    "--- round {round}, {}: {}{} ---",
                    variant.name,
                    phase.name(),
                    gap.map(|g| format!(" (gap {g} s)")).unwrap_or_default()
                );
                let outcome = group
                    .phase(&database, &skus, &mut generator, phase, gap)
                    .await
                    .with_context(|| format!("{} {}", variant.name, phase.name()))?;
                let outcome = Outcome { round, ..outcome };
                eprintln!("{}", outcome.row());
                outcomes.push(outcome);
            }
            group.stop().await?;
        }
    }
    println!("{}", Outcome::table(&outcomes));
    if let Some(path) = &args.report {
        let json = serde_json::json!({
            "topic": args.target.topic,
            "rate": args.rate,
            "phase_seconds": args.phase_seconds,
            "warmup_s": args.warmup,
            "members": args.members,
            "scale_to": args.scale_to,
            "roll_every_s": args.roll_every,
            "variants": args.variants.iter().map(|v| serde_json::json!({
                "name": v.name,
                "static_members": v.static_members,
                "env": v.env.iter().map(|(k, value)| shown(k, value)).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "phases": outcomes.iter().map(Outcome::to_json).collect::<Vec<_>>(),
        });
        output::write_json(path, &json)?;
        println!("report {}", path.display());
    }
    Ok(outcomes.iter().all(Outcome::ok))
}

/// `KEY=VALUE` as the report shows it: the value of a key that may hold a
/// secret (a SASL password, a database URL) left out.
fn shown(key: &str, value: &str) -> String {
    let key_lower = key.to_ascii_lowercase();
    let secret = ["password", "secret", "token", "jaas", "key", "url"]
        .iter()
        .any(|marker| key_lower.contains(marker));
    if secret {
        format!("{key}=(not shown)")
    } else {
        format!("{key}={value}")
    }
}

/// One variant's members, the first `--members` running between phases.
struct Group<'a> {
    args: &'a DeployArgs,
    variant: &'a Variant,
    members: Vec<Member>,
}

impl<'a> Group<'a> {
    /// Starts the group as a StatefulSet does: one member at a time, each
    /// ready before the next.
    async fn start(args: &'a DeployArgs, variant: &'a Variant) -> Result<Group<'a>> {
        let config = args.member_config(variant)?;
        let members = (0..args.scale_to)
            .map(|i| {
                let name = format!("{}-{i}", variant.name);
                let instance = variant.static_members.then(|| i.to_string());
                Member::new(
                    &config,
                    &name,
                    args.metrics_port + i as u16,
                    instance.as_deref(),
                )
            })
            .collect();
        let mut group = Group {
            args,
            variant,
            members,
        };
        for i in 0..args.members {
            group.members[i].start()?;
            group.members[i].wait_ready().await?;
        }
        Ok(group)
    }

    async fn stop(&mut self) -> Result<()> {
        for member in self.members.iter_mut().rev() {
            member.stop().await?;
        }
        Ok(())
    }

    /// One phase: the load and the actions together, then drained,
    /// reconciled and measured.
    async fn phase(
        &mut self,
        database: &Database,
        skus: &[String],
        generator: &mut Generator,
        phase: Phase,
        gap: Option<f64>,
    ) -> Result<Outcome> {
        let args = self.args;
        let before = database.snapshot(skus).await?;
        let producer =
            Producer::connect(&args.target.bootstrap_servers, &args.target.topic).await?;
        let mut manifest = Manifest::default();
        let started_at = Utc::now();
        let (produced, actions) = tokio::join!(
            produce::paced(
                &producer,
                generator,
                &mut manifest,
                args.rate,
                Duration::from_secs_f64(args.phase_seconds),
                None
            ),
            self.act(phase, gap)
        );
        let timeline = produced?;
        let actions = actions?;
        producer.finish().await?;
        for member in &mut self.members {
            if let Some(crash) = member.exited_unexpectedly() {
                bail!("{crash}");
            }
        }
        let settled = settle(
            database,
            &manifest,
            &before,
            skus,
            Duration::from_secs_f64(args.drain_timeout),
        )
        .await?;
        let latencies = Latencies::new(latency::samples(&manifest.send_times(), &settled.applied));
        let warm = timeline.started_at + chrono::Duration::milliseconds((args.warmup * 1e3) as i64);
        let whole: Vec<Sample> = latencies
            .samples()
            .iter()
            .filter(|s| s.sent_at >= warm)
            .copied()
            .collect();
        let window = disruption_window(&actions);
        let in_window: Vec<Sample> = window
            .map(|(from, to)| {
                latencies
                    .samples()
                    .iter()
                    .filter(|s| s.sent_at >= from && s.sent_at <= to)
                    .copied()
                    .collect()
            })
            .unwrap_or_default();
        let seconds = per_second(latencies.samples(), started_at);
        Ok(Outcome {
            variant: self.variant.name.clone(),
            seconds,
            round: 0,
            phase: phase.name(),
            gap_s: gap,
            events: manifest.events_sent(),
            duplicates_sent: manifest.duplicates,
            whole: quantiles(&whole),
            window: quantiles(&in_window),
            window_s: window.map(|(from, to)| {
                (
                    latency::seconds_between(started_at, from),
                    latency::seconds_between(started_at, to),
                )
            }),
            actions: actions
                .into_iter()
                .map(|a| Action {
                    at_s: latency::seconds_between(started_at, a.at),
                    ..a.action
                })
                .collect(),
            drained: settled.drained,
            reconciliation: settled.reconciliation,
        })
    }

    /// The phase's actions on the group, timed.
    async fn act(&mut self, phase: Phase, gap: Option<f64>) -> Result<Vec<Timed>> {
        let args = self.args;
        let began = Instant::now();
        let first = Duration::from_secs_f64(args.first_action_at);
        let every = Duration::from_secs_f64(args.roll_every);
        let mut actions = Vec::new();
        match phase {
            Phase::Baseline => {}
            Phase::Roll => {
                let gap = Duration::from_secs_f64(gap.unwrap_or(0.0));
                let mut next = began + first;
                for i in (0..args.members).rev() {
                    tokio::time::sleep_until(next.into()).await;
                    let at = Utc::now();
                    let stopping = Instant::now();
                    next = stopping + every;
                    let member = &mut self.members[i];
                    member.stop().await?;
                    let stopped_in = stopping.elapsed();
                    tokio::time::sleep(gap).await;
                    let starting = Instant::now();
                    member.start()?;
                    member.wait_ready().await?;
                    actions.push(Timed {
                        at,
                        action: Action {
                            what: format!("restart {}", member.name),
                            at_s: 0.0,
                            stopped_in_s: Some(stopped_in.as_secs_f64()),
                            ready_in_s: Some(starting.elapsed().as_secs_f64()),
                            took_s: stopping.elapsed().as_secs_f64(),
                        },
                    });
                }
            }
            Phase::Scale => {
                tokio::time::sleep_until((began + first).into()).await;
                for i in args.members..args.scale_to {
                    let at = Utc::now();
                    let starting = Instant::now();
                    let member = &mut self.members[i];
                    member.start()?;
                    member.wait_ready().await?;
                    actions.push(Timed {
                        at,
                        action: Action {
                            what: format!("scale out: start {}", member.name),
                            at_s: 0.0,
                            stopped_in_s: None,
                            ready_in_s: Some(starting.elapsed().as_secs_f64()),
                            took_s: starting.elapsed().as_secs_f64(),
                        },
                    });
                }
                tokio::time::sleep(every).await;
                for i in (args.members..args.scale_to).rev() {
                    let at = Utc::now();
                    let stopping = Instant::now();
                    let member = &mut self.members[i];
                    member.stop().await?;
                    actions.push(Timed {
                        at,
                        action: Action {
                            what: format!("scale in: stop {}", member.name),
                            at_s: 0.0,
                            stopped_in_s: Some(stopping.elapsed().as_secs_f64()),
                            ready_in_s: None,
                            took_s: stopping.elapsed().as_secs_f64(),
                        },
                    });
                }
            }
        }
        Ok(actions)
    }
}

/// The slowest event sent in each second of the phase, in milliseconds:
/// where a disruption's time went.
fn per_second(samples: &[Sample], started_at: DateTime<Utc>) -> Vec<(i64, u64, f64)> {
    let mut seconds: std::collections::BTreeMap<i64, (u64, f64)> = Default::default();
    for sample in samples {
        let second = (sample.sent_at - started_at).num_seconds();
        let millis = sample.latency().num_microseconds().unwrap_or(i64::MAX) as f64 / 1e3;
        let entry = seconds.entry(second).or_insert((0, 0.0));
        entry.0 += 1;
        entry.1 = entry.1.max(millis);
    }
    seconds
        .into_iter()
        .map(|(second, (count, max))| (second, count, max))
        .collect()
}

/// An action and the instant it began.
struct Timed {
    at: DateTime<Utc>,
    action: Action,
}

/// After the last action ended, how long its effects count as the
/// disruption's (the first fetches of partitions just handed over).
const WINDOW_TAIL: Duration = Duration::from_secs(1);

/// From the first action to 1 s after the last one ended; `None` without
/// actions.
fn disruption_window(actions: &[Timed]) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let first = actions.first()?.at;
    let end = actions
        .iter()
        .map(|a| a.at + chrono::Duration::microseconds((a.action.took_s * 1e6) as i64))
        .max()?;
    Some((
        first,
        end + chrono::Duration::from_std(WINDOW_TAIL).expect("a second"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variant_names_its_membership_gaps_and_environment() {
        let variant: Variant = "new dynamic gaps=0,2,10 KAFKA_PROPERTY_HEARTBEAT_INTERVAL_MS=100"
            .parse()
            .unwrap();
        assert_eq!(variant.name, "new");
        assert!(!variant.static_members);
        assert_eq!(variant.gaps, Some(vec![0.0, 2.0, 10.0]));
        assert_eq!(
            variant.env,
            vec![(
                "KAFKA_PROPERTY_HEARTBEAT_INTERVAL_MS".to_owned(),
                "100".to_owned()
            )]
        );
        assert_eq!(
            shown("KAFKA_PROPERTY_SASL_PASSWORD", "hunter2"),
            "KAFKA_PROPERTY_SASL_PASSWORD=(not shown)"
        );
        assert_eq!(shown("DB_POOL_SIZE", "4"), "DB_POOL_SIZE=4");
        assert!("old".parse::<Variant>().is_err());
        assert!("old sticky".parse::<Variant>().is_err());
        assert!("old static loose".parse::<Variant>().is_err());
    }
}
