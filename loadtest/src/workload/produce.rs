//! When the mix is sent: paced at the target rate or as fast as possible
//! (a prefill), with the lag spike injected at its moment; the records go
//! out through [`crate::workload::kafka::Producer`].
//!
//! Pacing is by credit: every 10 ms tick sends what the target rate owes
//! since the start (`elapsed × rate` minus what was sent), so events are
//! spread evenly across each second and a late tick is made up at the next
//! one instead of being lost. Each record's event time is the instant it is
//! handed to the producer, the start of its end-to-end latency.
//!
//! The spike starts `--pause-at` seconds in: the consumer is stopped
//! (SIGSTOP) when `--pause-consumer` is set, then `--backlog` extra events are
//! produced at full speed on top of the paced stream. It ends at SIGCONT, or,
//! without a pause, when the burst has been handed to the producer; catch-up
//! is measured from that instant.

use std::time::{Duration, Instant};

use anyhow::Result;
use chrono::{DateTime, Utc};

use crate::workload::generate::{Generator, Manifest};
use crate::workload::kafka::Producer;
use crate::workload::pause::PausedProcess;

/// Pacing granularity: 100 sends a second, about 14 events each at 1,400/s.
const TICK: Duration = Duration::from_millis(10);

/// The injected lag spike.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpikePlan {
    /// Seconds into the run.
    pub at: Duration,
    /// The consumer process to stop, and for how long.
    pub pause: Option<(i32, Duration)>,
    /// Extra events produced at full speed when the spike starts.
    pub backlog: u64,
}

/// The run's timeline: when production started and ended and when the spike
/// was injected, in wall-clock time (comparable with the database's
/// `processed_at` on the same machine).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeline {
    pub started_at: DateTime<Utc>,
    pub production_ended_at: DateTime<Utc>,
    pub spike: Option<SpikeTimes>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpikeTimes {
    /// SIGSTOP, or the start of the burst.
    pub began_at: DateTime<Utc>,
    /// SIGCONT, or the end of the burst: catch-up is measured from here.
    pub ended_at: DateTime<Utc>,
}

/// Sends one generated record and books it in the manifest.
pub async fn send_next(
    producer: &Producer,
    generator: &mut Generator,
    manifest: &mut Manifest,
) -> Result<()> {
    let planned = generator.next(Utc::now());
    producer.send(planned.record()).await?;
    manifest.record(&planned);
    Ok(())
}

/// `rate` events a second for `duration`, with the spike at its moment.
pub async fn paced(
    producer: &Producer,
    generator: &mut Generator,
    manifest: &mut Manifest,
    rate: f64,
    duration: Duration,
    spike: Option<SpikePlan>,
) -> Result<Timeline> {
    let total = (rate * duration.as_secs_f64()).round() as u64;
    let start = Instant::now();
    let started_at = Utc::now();
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent = 0u64;
    let mut spike_began: Option<DateTime<Utc>> = None;
    let mut spike_times = None;
    let mut paused: Option<(PausedProcess, Duration)> = None;
    loop {
        ticker.tick().await;
        let elapsed = start.elapsed();
        if let Some(plan) = spike.filter(|p| spike_began.is_none() && elapsed >= p.at) {
            let began_at = Utc::now();
            spike_began = Some(began_at);
            if let Some((pid, length)) = plan.pause {
                paused = Some((PausedProcess::stop(pid)?, plan.at + length));
            }
            for _ in 0..plan.backlog {
                send_next(producer, generator, manifest).await?;
            }
            if paused.is_none() {
                spike_times = Some(SpikeTimes {
                    began_at,
                    ended_at: Utc::now(),
                });
            }
        }
        if paused.as_ref().is_some_and(|(_, until)| elapsed >= *until) {
            let (process, _) = paused.take().expect("checked above");
            process.resume()?;
            spike_times = Some(SpikeTimes {
                began_at: spike_began.expect("a pause starts the spike"),
                ended_at: Utc::now(),
            });
        }
        let due = ((elapsed.as_secs_f64() * rate) as u64).min(total);
        while sent < due {
            send_next(producer, generator, manifest).await?;
            sent += 1;
        }
        // A pause reaching past the end of the stream is still ended here.
        if sent >= total && paused.is_none() && (spike.is_none() || spike_times.is_some()) {
            break;
        }
    }
    Ok(Timeline {
        started_at,
        production_ended_at: Utc::now(),
        spike: spike_times,
    })
}

/// `count` events as fast as the producer takes them (max-throughput runs).
/// With `pause`, that consumer is stopped meanwhile and continued once the
/// broker has acknowledged every record, so it then drains a full topic at
/// its own top speed.
pub async fn prefill(
    producer: &Producer,
    generator: &mut Generator,
    manifest: &mut Manifest,
    count: u64,
    pause: Option<i32>,
) -> Result<Timeline> {
    let started_at = Utc::now();
    let paused = pause.map(PausedProcess::stop).transpose()?;
    for _ in 0..count {
        send_next(producer, generator, manifest).await?;
    }
    let spike = match paused {
        Some(process) => {
            producer.wait_until_delivered().await?;
            process.resume()?;
            Some(SpikeTimes {
                began_at: started_at,
                ended_at: Utc::now(),
            })
        }
        None => None,
    };
    Ok(Timeline {
        started_at,
        production_ended_at: Utc::now(),
        spike,
    })
}
