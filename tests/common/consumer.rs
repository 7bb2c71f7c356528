//! The consumer run as a real process (the binary cargo built for the
//! tests), its metrics endpoint, and waiting for what it committed.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{binary, committed_offsets, free_port, http_get, kafka, unique, wait_until, TestDb};

/// The consumer, run as a real process.
pub struct ConsumerProcess {
    pub child: Child,
    pub metrics_port: u16,
    pub log: PathBuf,
}

/// How to start a consumer.
#[derive(Debug, Clone)]
pub struct ConsumerSpec {
    pub bootstrap: String,
    pub database_url: String,
    pub topic: String,
    pub group: String,
    pub consumer_name: String,
    pub dlq_topic: String,
    pub extra_env: Vec<(String, String)>,
    pub args: Vec<String>,
}

impl ConsumerSpec {
    /// A consumer of `topic` on the test's database, as its application role.
    pub fn new(db: &TestDb, topic: &str) -> ConsumerSpec {
        ConsumerSpec::at(&db.app_url, topic)
    }

    /// A consumer of `topic` on any database.
    pub fn at(database_url: &str, topic: &str) -> ConsumerSpec {
        ConsumerSpec {
            bootstrap: kafka().into(),
            database_url: database_url.into(),
            topic: topic.into(),
            group: unique("group"),
            consumer_name: "inventory-allocation-service".into(),
            dlq_topic: String::new(),
            extra_env: vec![],
            args: vec![],
        }
    }

    pub fn env(mut self, key: &str, value: &str) -> ConsumerSpec {
        self.extra_env.push((key.into(), value.into()));
        self
    }

    /// Runs `inventory-inbox positions ARGS` with the consumer's settings;
    /// its success and its standard output and error.
    pub fn positions(&self, args: &[&str]) -> (bool, String) {
        let (ok, out, err) = self.cli("positions", args);
        (ok, format!("{out}{err}"))
    }

    /// Runs `inventory-inbox COMMAND ARGS` with the consumer's settings
    /// (its extra environment too: TLS and SASL properties); its success,
    /// standard output and standard error.
    pub fn cli(&self, command: &str, args: &[&str]) -> (bool, String, String) {
        let output = Command::new(binary())
            .arg(command)
            .args(args)
            .env("DATABASE_URL", &self.database_url)
            .env("KAFKA_BOOTSTRAP_SERVERS", &self.bootstrap)
            .env("KAFKA_TOPIC", &self.topic)
            .env("KAFKA_GROUP_ID", &self.group)
            .env("INBOX_CONSUMER_NAME", &self.consumer_name)
            .envs(self.extra_env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap_or_else(|e| panic!("run inventory-inbox {command}: {e}"));
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    pub fn start(&self) -> ConsumerProcess {
        let metrics_port = free_port();
        let log_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("consumer-logs");
        std::fs::create_dir_all(&log_dir).expect("log dir");
        let log = log_dir.join(format!("{}.log", unique("consumer")));
        let log_file = std::fs::File::create(&log).expect("log file");
        let mut command = Command::new(binary());
        command
            .arg("run")
            .args(&self.args)
            .env("DATABASE_URL", &self.database_url)
            .env("KAFKA_BOOTSTRAP_SERVERS", &self.bootstrap)
            .env("KAFKA_TOPIC", &self.topic)
            .env("KAFKA_GROUP_ID", &self.group)
            .env("INBOX_CONSUMER_NAME", &self.consumer_name)
            .env("DLQ_TOPIC", &self.dlq_topic)
            .env("METRICS_ADDR", format!("127.0.0.1:{metrics_port}"))
            .env("RUST_LOG", "info,inventory_inbox=debug")
            .stdout(Stdio::null())
            .stderr(log_file);
        // A stopped member's partitions move quickly in tests: the client's
        // session with the classic protocol; the consumer protocol's is the
        // broker's (scripts/services.sh sets it to 10 s).
        let consumer_protocol = self
            .extra_env
            .iter()
            .any(|(k, v)| k == "GROUP_PROTOCOL" && v == "consumer");
        if !consumer_protocol {
            command
                .env("KAFKA_PROPERTY_SESSION_TIMEOUT_MS", "6000")
                .env("KAFKA_PROPERTY_HEARTBEAT_INTERVAL_MS", "1000");
        }
        for (key, value) in &self.extra_env {
            command.env(key, value);
        }
        let child = command.spawn().expect("start inventory-inbox run");
        ConsumerProcess {
            child,
            metrics_port,
            log,
        }
    }
}

impl ConsumerProcess {
    /// Sends a signal (SIGTERM for a graceful stop, SIGKILL for a crash).
    pub fn signal(&self, signal: i32) {
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
    }

    /// Graceful stop; asserts exit status 0 within the timeout.
    pub async fn stop(mut self) {
        self.signal(libc::SIGTERM);
        let status = self.wait(Duration::from_secs(30)).await;
        assert!(
            status.success(),
            "consumer exited with {status:?}; log: {}",
            self.log_text()
        );
    }

    /// Crash: SIGKILL and reap.
    pub async fn kill(mut self) {
        self.signal(libc::SIGKILL);
        self.wait(Duration::from_secs(10)).await;
    }

    pub async fn wait(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if started.elapsed() >= timeout {
                let log = self.log_text();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                panic!(
                    "consumer did not exit within {timeout:?}; its log ({}) ends:\n{}",
                    self.log.display(),
                    tail.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The status and body of a GET on the metrics endpoint, or None.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.metrics_port, path).await
    }

    /// The text of `/metrics`. Waits up to 10 s for the endpoint to answer
    /// (the process may be starting), then fails the test.
    pub async fn metrics_text(&self) -> String {
        let started = Instant::now();
        loop {
            if let Some((200, body)) = self.get("/metrics").await {
                return body;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the consumer's /metrics does not answer; log:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The value of one series, its name and labels exactly as exposed.
    /// Fails the test when the series is not exposed: every series the
    /// tests read exists from the first scrape, so a missing one is a wrong
    /// name (or a dead endpoint), never a zero.
    pub async fn metric(&self, series: &str) -> f64 {
        let body = self.metrics_text().await;
        series_value(&body, series).unwrap_or_else(|| {
            panic!("{series} is not exposed by the consumer's /metrics:\n{body}")
        })
    }

    /// The sum of every series of a family (`inbox_db_retries_total`: all
    /// reasons). Fails the test when the family is not exposed.
    pub async fn metric_sum(&self, family: &str) -> f64 {
        let body = self.metrics_text().await;
        let values: Vec<f64> = body
            .lines()
            .filter(|line| {
                line.strip_prefix(family)
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
            .filter_map(|line| line.rsplit_once(' ')?.1.parse().ok())
            .collect();
        assert!(
            !values.is_empty(),
            "{family} is not exposed by the consumer's /metrics:\n{body}"
        );
        values.iter().sum()
    }
}

/// The value of one series in a Prometheus text exposition.
pub fn series_value(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok()).flatten()
    })
}

impl Drop for ConsumerProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits until the spec's group has committed `offset` on partition 0 of its
/// (one-partition) topic.
pub async fn wait_committed(spec: &ConsumerSpec, offset: i64) {
    wait_until(
        Duration::from_secs(60),
        &format!("offset {offset} committed"),
        || async { committed_offsets(&spec.group, &spec.topic, 1)[&0] == offset },
    )
    .await;
}

/// Waits until the group's committed offsets over all partitions add up to
/// `total` records (each partition's log starts at 0).
pub async fn wait_all_committed(
    group: &str,
    topic: &str,
    partitions: i32,
    total: i64,
    timeout: Duration,
) {
    wait_until(timeout, &format!("{total} records committed"), || async {
        committed_offsets(group, topic, partitions)
            .values()
            .filter(|offset| **offset > 0)
            .sum::<i64>()
            == total
    })
    .await;
}
