//! `inbox-loadgen run`: one scenario against a running consumer. Seed and
//! snapshot the database, produce the mix (paced, with the lag spike, or as
//! a prefill), wait until the consumer drained, reconcile, measure, write
//! the report and the picture. `Ok(false)` when reconciliation failed.
//!
//! `--backlog N` bursts N extra events at full speed at `--pause-at`, right
//! after SIGSTOP when `--pause-consumer` is set (so the consumer finds the
//! pause's events plus N), on top of the paced stream. `--prefill N` only
//! sends N events as fast as possible; with `--no-wait` it exits then,
//! otherwise it waits for the consumer (which may be started afterwards)
//! and reports its throughput from the first to the last ledger row. With
//! `--pause-consumer` too, the consumer is stopped during the prefill and
//! continued once every record is acknowledged: a self-contained
//! max-throughput run whose `catch_up_seconds` is the time to drain it.
//!
//! `--consumer-bin` makes the run whole: the consumer is started first
//! (a member of [`crate::workload::fleet`], in a group of its own named
//! after the topic), the run begins once it is ready, `--pause` freezes
//! it, and it is stopped at the end, whatever the outcome.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use chrono::Utc;
use clap::Args;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::commands::flags::{consumer_binary, consumer_env, Mix, Target};
use crate::commands::settle::{settle, Settled};
use crate::output;
use crate::output::chart;
use crate::output::report::{Findings, Settings};
use crate::probes::scrape;
use crate::verdict::histogram;
use crate::verdict::latency::{self, quantiles, seconds_between, Latencies};
use crate::workload::fleet::{Member, MemberConfig};
use crate::workload::generate::{Generator, Manifest, MixConfig};
use crate::workload::kafka::{Acknowledgements, Producer};
use crate::workload::pause;
use crate::workload::produce::{self, SpikePlan, Timeline};

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    target: Target,

    /// The consumer's Prometheus endpoint (plain http://).
    #[arg(
        long,
        env = "LOADGEN_METRICS_URL",
        default_value = "http://127.0.0.1:9464/metrics"
    )]
    metrics_url: String,

    /// Name of the scenario in the report [default: steady, lag-spike,
    /// backlog-burst or prefill, from the other flags].
    #[arg(long)]
    scenario: Option<String>,

    /// Events per second.
    #[arg(long, default_value_t = 1400.0)]
    rate: f64,

    /// Seconds of paced production.
    #[arg(long, default_value_t = 60.0)]
    duration: f64,

    #[command(flatten)]
    mix: Mix,

    /// Process id of the consumer to pause (SIGSTOP, then SIGCONT).
    #[arg(long, value_name = "PID")]
    pause_consumer: Option<i32>,

    /// Start the consumer, `PATH run`, with the target's settings, its
    /// metrics where --metrics-url points and its log beside the report
    /// (.consumer.log); ready (/readyz) before the run, stopped (SIGTERM)
    /// after it.
    #[arg(long, value_name = "PATH", requires = "report")]
    consumer_bin: Option<PathBuf>,

    /// Environment of the started consumer, on top of this program's and
    /// the target's (repeatable).
    #[arg(
        long = "consumer-env",
        value_name = "KEY=VALUE",
        requires = "consumer_bin"
    )]
    consumer_env: Vec<String>,

    /// Pause the started consumer, as --pause-consumer pauses a process.
    #[arg(long, requires = "consumer_bin", conflicts_with = "pause_consumer")]
    pause: bool,

    /// Seconds into the run when the spike (pause and/or backlog) starts.
    #[arg(long, default_value_t = 10.0)]
    pause_at: f64,

    /// Seconds the consumer stays paused.
    #[arg(long, default_value_t = 10.0)]
    pause_for: f64,

    /// Extra events burst at full speed when the spike starts.
    #[arg(long, default_value_t = 0)]
    backlog: u64,

    /// Only produce N events as fast as possible (max-throughput runs); with
    /// --pause-consumer the consumer is stopped until all are acknowledged.
    #[arg(long, value_name = "N", conflicts_with = "backlog")]
    prefill: Option<u64>,

    /// With --prefill: exit once produced, without waiting, reconciling or
    /// writing a report.
    #[arg(long, requires = "prefill")]
    no_wait: bool,

    /// Where the JSON report goes; the picture goes beside it (.svg).
    #[arg(long, value_name = "FILE.json")]
    report: Option<PathBuf>,

    /// Seconds at the start whose events are left out of e2e_latency_ms (a
    /// new topic, a cold consumer); they are still reconciled.
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,

    /// Seconds to wait for the consumer to apply everything after production.
    #[arg(long, default_value_t = 120.0)]
    drain_timeout: f64,
}

impl RunArgs {
    fn mix(&self) -> MixConfig {
        self.mix.config()
    }

    /// The spike of a paced run.
    fn spike(&self) -> Option<SpikePlan> {
        if self.prefill.is_some() || (self.pause_consumer.is_none() && self.backlog == 0) {
            return None;
        }
        Some(SpikePlan {
            at: Duration::from_secs_f64(self.pause_at),
            pause: self
                .pause_consumer
                .map(|pid| (pid, Duration::from_secs_f64(self.pause_for))),
            backlog: self.backlog,
        })
    }

    fn validate(&self) -> Result<()> {
        self.mix().validate().map_err(|e| anyhow!(e))?;
        let positive = |flag: &str, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(anyhow!("{flag} must be above 0, not {value}"))
            }
        };
        positive("--rate", self.rate)?;
        positive("--duration", self.duration)?;
        positive("--drain-timeout", self.drain_timeout)?;
        if !(0.0..self.duration).contains(&self.warmup) {
            bail!(
                "--warmup ({}) must be at least 0 and shorter than --duration ({})",
                self.warmup,
                self.duration
            );
        }
        if self.spike().is_some() {
            positive("--pause-for", self.pause_for)?;
            if !(0.0..self.duration).contains(&self.pause_at) {
                bail!(
                    "--pause-at ({}) must fall within the run (--duration {})",
                    self.pause_at,
                    self.duration
                );
            }
        }
        if let Some(pid) = self.pause_consumer {
            pause::check_signalable(pid)?;
        }
        Ok(())
    }

    fn scenario(&self) -> String {
        self.scenario.clone().unwrap_or_else(|| {
            match (self.prefill, self.pause_consumer, self.backlog) {
                (Some(_), _, _) => "prefill",
                (None, Some(_), _) => "lag-spike",
                (None, None, 1..) => "backlog-burst",
                (None, None, 0) => "steady",
            }
            .to_owned()
        })
    }

    fn settings(&self) -> Settings {
        let spike = self.spike().is_some();
        Settings {
            topic: self.target.topic.clone(),
            consumer: self.target.consumer_name.clone(),
            rate: self.rate,
            duration_s: self.duration,
            duplicate_ratio: self.mix.duplicate_ratio,
            poison_ratio: self.mix.poison_ratio,
            skus: self.mix.skus,
            hot_skus: self.mix.hot_skus,
            hot_share: self.mix.hot_share,
            pause_consumer: self.pause_consumer,
            pause_at_s: spike.then_some(self.pause_at),
            pause_for_s: (spike && self.pause_consumer.is_some()).then_some(self.pause_for),
            backlog: self.backlog,
            prefill: self.prefill,
            warmup_s: self.warmup,
        }
    }
}

/// One run, with the consumer of --consumer-bin around it; `Ok(false)`
/// when reconciliation failed.
pub async fn run(mut args: RunArgs) -> Result<bool> {
    let Some(mut consumer) = start_consumer(&args).await? else {
        return measure(args).await;
    };
    if args.pause {
        args.pause_consumer = consumer.pid().map(|pid| pid as i32);
    }
    let outcome = measure(args).await;
    if let Err(error) = consumer.stop().await {
        eprintln!("warning: {error:#}");
    }
    outcome
}

/// The consumer of --consumer-bin, started and ready; None without one.
async fn start_consumer(args: &RunArgs) -> Result<Option<Member>> {
    let Some(binary) = &args.consumer_bin else {
        return Ok(None);
    };
    let report = args
        .report
        .as_ref()
        .context("--consumer-bin needs --report")?;
    let name = format!(
        "{}.consumer",
        report.file_stem().unwrap_or_default().to_string_lossy()
    );
    let log_dir = report.parent().map(Path::to_path_buf).unwrap_or_default();
    // A log of this run only.
    let _ = std::fs::remove_file(log_dir.join(format!("{name}.log")));
    let target = &args.target;
    let config = MemberConfig {
        binary: consumer_binary(Some(binary))?,
        database_url: target.database_url.clone(),
        bootstrap_servers: target.bootstrap_servers.clone(),
        topic: target.topic.clone(),
        group: target.topic.clone(),
        consumer_name: target.consumer_name.clone(),
        env: consumer_env(&args.consumer_env)?,
        log_dir,
    };
    let mut consumer = Member::new(&config, &name, metrics_port(&args.metrics_url)?, None);
    consumer.start()?;
    consumer.wait_ready().await?;
    Ok(Some(consumer))
}

/// The port of a metrics URL (http://127.0.0.1:PORT/metrics), where the
/// started consumer serves.
fn metrics_port(url: &str) -> Result<u16> {
    let authority = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next());
    let port = authority.and_then(|authority| authority.rsplit_once(':'));
    port.and_then(|(_, port)| port.parse().ok())
        .with_context(|| format!("--metrics-url {url}: no port for the started consumer"))
}

/// Measures one run against a running consumer.
async fn measure(args: RunArgs) -> Result<bool> {
    args.validate()?;
    let scenario = args.scenario();
    let mix = args.mix();
    let skus = mix.sku_names();
    let database = args
        .target
        .database(
            args.duration + args.drain_timeout,
            args.mix.event_day_offset,
        )
        .await?;
    database.seed(&skus).await?;
    let before = database.snapshot(&skus).await?;

    let metrics_before = match scrape::batch_durations(&args.metrics_url).await {
        Ok(buckets) => Some((Utc::now(), buckets)),
        Err(error) => {
            eprintln!("warning: no batch durations ({error:#}); batch_duration_ms will be null");
            None
        }
    };
    let sampler = scrape::Sampler::start(args.metrics_url.clone(), metrics_before.clone());

    let (timeline, manifest, acknowledgements) = send(&args, &scenario, mix).await?;
    if args.no_wait {
        println!(
            "prefill: sent {} records ({} unique, {} duplicates, {} poison) to {}; not waiting",
            manifest.events_sent(),
            manifest.unique_events(),
            manifest.duplicates,
            manifest.poison_sent(),
            args.target.topic
        );
        return Ok(true);
    }

    let Settled {
        drained,
        applied,
        reconciliation,
    } = settle(
        &database,
        &manifest,
        &before,
        &skus,
        Duration::from_secs_f64(args.drain_timeout),
    )
    .await?;
    let samples_of_metrics = sampler.finish();
    let metrics_after = scrape::batch_durations(&args.metrics_url).await.ok();

    let latencies = Latencies::new(latency::samples(&manifest.send_times(), &applied));
    let spike = timeline
        .spike
        .map(|times| latencies.spike(times.began_at, times.ended_at));
    let warmup_until =
        timeline.started_at + chrono::Duration::microseconds((args.warmup * 1e6) as i64);
    let phases = latencies.split(spike.as_ref(), warmup_until);
    let (throughput_eps, throughput_definition) = throughput(&args, &timeline, &latencies);

    let batch_durations = metrics_before
        .as_ref()
        .zip(metrics_after.as_ref())
        .map(|((_, before), after)| after.since(before));
    let spike_batch_durations = spike.as_ref().and_then(|outcome| {
        histogram::between(&samples_of_metrics, outcome.began_at, outcome.window_end)
    });

    let settings = args.settings();
    let picture_path = args.report.as_ref().map(|path| path.with_extension("svg"));
    let findings = Findings {
        scenario: &scenario,
        settings: &settings,
        events_sent: manifest.events_sent(),
        unique_events: manifest.unique_events(),
        duplicates_sent: manifest.duplicates,
        poison_sent: &manifest.poison,
        timeline: &timeline,
        drained,
        throughput_eps,
        throughput_definition,
        produce_ack: latency::Quantiles::of(&acknowledgements.latency),
        last_applied_at: latencies.last_applied_at(),
        steady: quantiles(&phases.steady),
        spiked: quantiles(&phases.spiked),
        warmup: (args.warmup > 0.0).then(|| quantiles(&phases.warmup)),
        spike,
        batch_durations,
        spike_batch_durations,
        reconciliation: &reconciliation,
        picture: picture_path.as_ref().map(|p| p.display().to_string()),
    };

    if let (Some(report_path), Some(picture_path)) = (&args.report, &picture_path) {
        output::write_json(report_path, &findings.to_json())?;
        let pause_label = if args.pause_consumer.is_some() {
            "consumer paused"
        } else {
            "backlog burst"
        };
        let picture = chart::render(&chart::Picture {
            title: picture_title(&scenario, &args, &findings),
            started_at: timeline.started_at,
            samples: latencies.samples(),
            pause: timeline
                .spike
                .map(|t| (t.began_at, t.ended_at, pause_label)),
            spike: spike.as_ref(),
            warmup_until: (args.warmup > 0.0).then_some(warmup_until),
            steady: &phases.steady,
            spiked: &phases.spiked,
        })?;
        std::fs::write(picture_path, picture)
            .with_context(|| format!("writing {}", picture_path.display()))?;
    }
    println!("{}", findings.summary());
    if let (Some(report_path), Some(picture_path)) = (&args.report, &picture_path) {
        println!(
            "report {}, picture {}",
            report_path.display(),
            picture_path.display()
        );
    }
    Ok(reconciliation.ok)
}

/// Sends the scenario's records, paced or as a prefill, with its spike;
/// returns when the broker has acknowledged every one of them.
async fn send(
    args: &RunArgs,
    scenario: &str,
    mix: MixConfig,
) -> Result<(Timeline, Manifest, Acknowledgements)> {
    let producer = Producer::connect(&args.target.bootstrap_servers, &args.target.topic).await?;
    let run_tag = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let mut generator = Generator::new(mix, StdRng::from_entropy(), run_tag.clone());
    let mut manifest = Manifest::default();
    eprintln!(
        "inbox-loadgen {scenario} (run {run_tag}): producing to {} …",
        args.target.topic
    );
    let timeline = match args.prefill {
        Some(count) => {
            produce::prefill(
                &producer,
                &mut generator,
                &mut manifest,
                count,
                args.pause_consumer,
            )
            .await?
        }
        None => {
            produce::paced(
                &producer,
                &mut generator,
                &mut manifest,
                args.rate,
                Duration::from_secs_f64(args.duration),
                args.spike(),
            )
            .await?
        }
    };
    let acknowledgements = producer.finish().await?;
    if !manifest.ids_are_unique() {
        bail!("two events drew the same random id; rerun");
    }
    eprintln!(
        "produced {} records in {:.1} s",
        manifest.events_sent(),
        seconds_between(timeline.started_at, Utc::now())
    );
    Ok((timeline, manifest, acknowledgements))
}

/// Unique events applied per second, and how it was measured. Paced: over
/// first send -> last ledger row (it can only match the rate). Prefill: over
/// the first -> last ledger row, the consumer's own speed whenever it was
/// started.
fn throughput(
    args: &RunArgs,
    timeline: &Timeline,
    latencies: &Latencies,
) -> (Option<f64>, &'static str) {
    if args.prefill.is_some() {
        (
            latencies.applied_per_second(None),
            "unique events applied / (last ledger row - first ledger row)",
        )
    } else {
        (
            latencies.applied_per_second(Some(timeline.started_at)),
            "unique events applied / (last ledger row - first send)",
        )
    }
}

fn picture_title(scenario: &str, args: &RunArgs, findings: &Findings<'_>) -> String {
    let load = match args.prefill {
        Some(n) => format!("prefill of {n} events"),
        None => format!("{} events/s for {} s", args.rate, args.duration),
    };
    let verdict = if findings.reconciliation.ok {
        "reconciled"
    } else {
        "RECONCILIATION FAILED"
    };
    format!("inbox-loadgen {scenario}: {load}, {verdict}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_started_consumer_serves_on_the_metrics_urls_port() {
        assert_eq!(metrics_port("http://127.0.0.1:9464/metrics").unwrap(), 9464);
        assert_eq!(metrics_port("http://127.0.0.1:19464").unwrap(), 19464);
        assert!(metrics_port("http://127.0.0.1/metrics").is_err());
        assert!(metrics_port("https://127.0.0.1:9464/metrics").is_err());
    }
}
