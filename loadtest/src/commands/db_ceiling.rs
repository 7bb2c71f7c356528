//! The database-only ceiling (`inbox-loadgen db-ceiling`): the service's own
//! batch transaction (`Inbox::apply`, the same SQL as `run`) driven directly,
//! with no Kafka in between, over the same event mix. The full pipeline's
//! throughput divided by this is the fraction of the database's capacity it
//! reaches.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use chrono::Utc;
use clap::Args;
use inventory_inbox::batch::InboundRecord;
use inventory_inbox::event::Header;
use inventory_inbox::store::{self, Inbox};
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::probes::database::Database;
use crate::workload::generate::{Generator, MixConfig, Planned};

#[derive(Debug, Args)]
pub struct CeilingArgs {
    /// A migrated database (its password is never printed).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// Ledger consumer name to write under.
    #[arg(long, default_value = "db-ceiling")]
    consumer_name: String,
    /// Fresh events to apply.
    #[arg(long, default_value_t = 200_000)]
    events: u64,
    /// Records per transaction.
    #[arg(long, default_value_t = 100)]
    batch_size: usize,
    #[command(flatten)]
    skus: SkuMix,
    /// Where to write {"events", "seconds", "events_per_second"}.
    #[arg(long, value_name = "FILE.json")]
    report: Option<PathBuf>,
}

/// The SKUs the fresh events of `db-ceiling` and `profile` name.
#[derive(Debug, Args)]
pub struct SkuMix {
    /// Seeded SKUs.
    #[arg(long, default_value_t = 1000)]
    skus: usize,
    /// SKUs receiving --hot-share of the lines.
    #[arg(long, default_value_t = 10)]
    hot_skus: usize,
    #[arg(long, default_value_t = 0.5)]
    hot_share: f64,
}

impl SkuMix {
    /// Fresh events only: no duplicates, no poison.
    pub fn fresh(&self) -> Result<MixConfig> {
        let mix = MixConfig {
            duplicate_ratio: 0.0,
            poison_ratio: 0.0,
            skus: self.skus,
            hot_skus: self.hot_skus,
            hot_share: self.hot_share,
            event_day_offset: 0,
        };
        mix.validate().map_err(|e| anyhow!(e))?;
        Ok(mix)
    }
}

pub async fn db_ceiling(args: CeilingArgs) -> Result<bool> {
    let mix = args.skus.fresh()?;
    let result = measure(
        &args.database_url,
        &args.consumer_name,
        mix,
        args.events,
        args.batch_size.max(1),
    )
    .await?;
    println!(
        "db-only ceiling: {} events in {:.2} s = {:.0} events/s (batches of {})",
        result.events, result.seconds, result.events_per_second, args.batch_size
    );
    if let Some(path) = &args.report {
        let json = serde_json::json!({
            "events": result.events,
            "seconds": result.seconds,
            "events_per_second": result.events_per_second,
            "batch_size": args.batch_size,
        });
        std::fs::write(path, serde_json::to_vec_pretty(&json)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(true)
}

/// What the ceiling run measured.
#[derive(Debug, Clone, Copy)]
struct Ceiling {
    pub events: u64,
    pub seconds: f64,
    pub events_per_second: f64,
}

/// `events` fresh events of the mix as the consumer would poll them from
/// partition 0 of `topic`, from offset 0.
pub fn fresh_records(mix: MixConfig, events: u64, topic: &str) -> Vec<InboundRecord> {
    let mut generator = Generator::new(
        mix,
        StdRng::from_entropy(),
        format!("ceil{}", std::process::id()),
    );
    (0..events)
        .map(|offset| {
            let record = match generator.next(Utc::now()) {
                Planned::Fresh { record, .. } => record,
                other => other.record().clone(),
            };
            InboundRecord {
                topic: topic.into(),
                partition: 0,
                offset: offset as i64,
                timestamp: None,
                key: Some(record.key.into_bytes()),
                payload: Some(record.payload),
                headers: record
                    .headers
                    .into_iter()
                    .map(|(key, value)| Header {
                        key,
                        value: Some(value.into_bytes()),
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Applies `events` fresh events in batches of `batch_size`, one transaction
/// each, sequentially, and times it.
async fn measure(
    database_url: &str,
    consumer: &str,
    mix: MixConfig,
    events: u64,
    batch_size: usize,
) -> Result<Ceiling> {
    let today = Utc::now().date_naive();
    let database = Database::connect(database_url, consumer, "db-ceiling", (today, today)).await?;
    database.seed(&mix.sku_names()).await?;
    let records = fresh_records(mix, events, "db-ceiling");
    let connection = store::Connection {
        url: database_url,
        statement_timeout: std::time::Duration::from_secs(30),
        lock_timeout: std::time::Duration::from_secs(5),
        pooler: store::Pooler::None,
    };
    let pool = store::connect(connection, 1)
        .await
        .context("connecting to DATABASE_URL")?;
    let inbox = Inbox::new(pool, consumer.to_owned());
    let started = Instant::now();
    for batch in records.chunks(batch_size) {
        let batch = inbox.classify(batch.to_vec());
        inbox
            .apply(&batch, None)
            .await
            .context("applying a batch")?;
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(Ceiling {
        events,
        seconds,
        events_per_second: events as f64 / seconds,
    })
}
