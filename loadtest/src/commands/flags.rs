//! Flags shared by the subcommands that drive a consumer: where it is
//! (database, broker, topic, its ledger name) and the event mix to send.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use chrono::Utc;
use clap::Args;

use crate::probes::database::Database;
use crate::workload::generate::MixConfig;

/// The consumer under test, as the service itself is configured (docs/design.md#configuration).
#[derive(Debug, Args)]
pub struct Target {
    /// The consumer's database (its password is never printed).
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://inventory:inventory@127.0.0.1:5432/inventory",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub database_url: String,

    #[arg(
        long,
        env = "KAFKA_BOOTSTRAP_SERVERS",
        default_value = "127.0.0.1:9092"
    )]
    pub bootstrap_servers: String,

    /// The topic the consumer reads.
    #[arg(long, env = "KAFKA_TOPIC", default_value = "orders.placed.v1")]
    pub topic: String,

    /// The consumer's logical name in the ledger and parked rows.
    #[arg(
        long,
        env = "INBOX_CONSUMER_NAME",
        default_value = "inventory-allocation-service"
    )]
    pub consumer_name: String,
}

impl Target {
    /// The consumer's database, for a run of `run_seconds`: its events fall
    /// on the days from today (UTC) until a day after the run's end.
    /// The database, its ledger scans bounded to the event days a run of
    /// `run_seconds` with events `day_offset` days ahead can write.
    pub async fn database(&self, run_seconds: f64, day_offset: i64) -> Result<Database> {
        let now = Utc::now() + chrono::Duration::days(day_offset);
        let last_day = now + chrono::Duration::seconds(run_seconds as i64 + 86_400);
        Database::connect(
            &self.database_url,
            &self.consumer_name,
            &self.topic,
            (now.date_naive(), last_day.date_naive()),
        )
        .await
    }
}

/// What is sent besides fresh events, and over which SKUs.
#[derive(Debug, Args)]
pub struct Mix {
    /// Fraction of sends that re-send an earlier valid record unchanged.
    #[arg(long, default_value_t = 0.05)]
    pub duplicate_ratio: f64,

    /// Fraction of sends that are poison, every reason round-robin.
    #[arg(long, default_value_t = 0.01)]
    pub poison_ratio: f64,

    /// SKUs seeded and ordered.
    #[arg(long, default_value_t = 1000)]
    pub skus: usize,

    /// SKUs receiving `--hot-share` of the order lines.
    #[arg(long, default_value_t = 10)]
    pub hot_skus: usize,

    /// Share of order lines on the hot SKUs.
    #[arg(long, default_value_t = 0.5)]
    pub hot_share: f64,

    /// Days added to every event time, as a soak's simulated days need
    /// (`make soak`); the end-to-end latency is still measured from the send.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub event_day_offset: i64,
}

impl Mix {
    pub fn config(&self) -> MixConfig {
        MixConfig {
            duplicate_ratio: self.duplicate_ratio,
            poison_ratio: self.poison_ratio,
            skus: self.skus,
            hot_skus: self.hot_skus,
            hot_share: self.hot_share,
            event_day_offset: self.event_day_offset,
        }
    }
}

/// The service binary of a run's consumers: `--consumer-bin`, else
/// `inventory-inbox` beside this program.
pub fn consumer_binary(consumer_bin: Option<&PathBuf>) -> Result<PathBuf> {
    let binary = match consumer_bin {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .context("locating this program")?
            .with_file_name("inventory-inbox"),
    };
    if !binary.is_file() {
        bail!("--consumer-bin {}: no such file", binary.display());
    }
    Ok(binary)
}

/// `--consumer-env KEY=VALUE` pairs.
pub fn consumer_env(pairs: &[String]) -> Result<Vec<(String, String)>> {
    pairs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| anyhow!("--consumer-env {pair:?} is not KEY=VALUE"))
        })
        .collect()
}
