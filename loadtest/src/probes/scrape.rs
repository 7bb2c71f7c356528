//! The consumer's own batch-duration histogram, read from its `/metrics`
//! with a plain HTTP/1.0 GET over TCP (one endpoint, one request: no HTTP
//! client needed), once before and after the run and every half second in
//! between, so that any interval of the run can be cut out afterwards
//! ([`crate::verdict::histogram`] does the arithmetic).
//!
//! A stopped consumer accepts the connection but never answers, so every
//! scrape has a short timeout and a failed one is just a missing sample.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use chrono::Utc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::verdict::histogram::{Buckets, Scraped};

/// The consumer's histogram of poll -> DB commit per batch (docs/design.md#observability).
const BATCH_DURATION: &str = "inbox_batch_duration_seconds";
/// Longest wait for one scrape.
const SCRAPE_TIMEOUT: Duration = Duration::from_millis(400);
/// Sampling period during a run, to cut out the catch-up phase afterwards.
const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// `http://host:port/path` split into address and path.
fn split_url(url: &str) -> Result<(&str, &str)> {
    let Some(rest) = url.strip_prefix("http://") else {
        bail!("--metrics-url must start with http://, not {url:?}");
    };
    Ok(match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, "/"),
    })
}

/// One GET; the body when the status is 200.
pub async fn fetch(url: &str) -> Result<String> {
    let (address, path) = split_url(url)?;
    let exchange = async {
        let mut stream = TcpStream::connect(address).await?;
        let request =
            format!("GET {path} HTTP/1.0\r\nHost: {address}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(response)
    };
    let response = tokio::time::timeout(SCRAPE_TIMEOUT, exchange)
        .await
        .with_context(|| format!("{url}: no answer within {SCRAPE_TIMEOUT:?}"))?
        .with_context(|| format!("GET {url}"))?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .with_context(|| format!("{url}: malformed HTTP response"))?;
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        bail!("{url}: {status}");
    }
    Ok(body.to_owned())
}

/// The batch-duration histogram now.
pub async fn batch_durations(url: &str) -> Result<Buckets> {
    let buckets = Buckets::parse(&fetch(url).await?, BATCH_DURATION);
    if buckets.0.is_empty() {
        bail!("{url} has no {BATCH_DURATION} histogram");
    }
    Ok(buckets)
}

/// Scrapes every half second in the background, so the quantiles of any
/// interval of the run (the catch-up) can be computed afterwards.
pub struct Sampler {
    samples: Arc<Mutex<Vec<Scraped>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    /// Starts sampling; `first` (the scrape taken before the run) is the
    /// sample every interval of the run can start from.
    pub fn start(url: String, first: Option<Scraped>) -> Sampler {
        let samples = Arc::new(Mutex::new(Vec::from_iter(first)));
        let shared = Arc::clone(&samples);
        let task = tokio::spawn(async move {
            let mut ticker = tokio::time::interval(SAMPLE_EVERY);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                if let Ok(buckets) = batch_durations(&url).await {
                    shared
                        .lock()
                        .expect("no panic holds the lock")
                        .push((Utc::now(), buckets));
                }
            }
        });
        Sampler { samples, task }
    }

    /// Stops sampling and returns the samples in time order.
    pub fn finish(self) -> Vec<Scraped> {
        self.task.abort();
        std::mem::take(&mut *self.samples.lock().expect("no panic holds the lock"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_address_and_path() {
        assert_eq!(
            split_url("http://127.0.0.1:9470/metrics").unwrap(),
            ("127.0.0.1:9470", "/metrics")
        );
        assert_eq!(split_url("http://h:1").unwrap(), ("h:1", "/"));
        assert!(split_url("https://h/metrics").is_err());
    }
}
