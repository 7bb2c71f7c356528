//! An Apache Kafka broker of one test's own, for tests that kill the broker:
//! the shared broker on 9092 serves every other test running in parallel and
//! must never go down.
//!
//! It is the same Kafka as the shared one (the jars `scripts/services.sh up`
//! fetched into `.local/kafka/libs`), one KRaft node that is broker and
//! controller, on two free loopback ports, with its data in a fresh
//! directory. Dropping it kills the broker and removes the directory.
//! Anything that keeps it from starting FAILS the test, it never skips.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use uuid::Uuid;

use super::{create_topic_at, free_port, unique};

/// Longest wait for the broker to answer after a (re)start.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// A private broker, running or killed.
pub struct PrivateKafka {
    /// Holds `server.properties`, `data/` and the logs; removed on drop.
    dir: PathBuf,
    port: u16,
    controller_port: u16,
    broker: Option<Child>,
}

impl PrivateKafka {
    /// Writes the configuration, formats the storage, starts the broker and
    /// waits until it serves metadata.
    pub fn start() -> PrivateKafka {
        let libs = libs_dir();
        assert!(
            libs.join(".complete").exists(),
            "Kafka jars not found in {}: run `scripts/services.sh up` (it fetches them)",
            libs.display()
        );
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("inbox-kafka-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("private kafka dir");
        let mut kafka = PrivateKafka {
            dir,
            port: free_port(),
            controller_port: free_port(),
            broker: None,
        };
        kafka.write_config();
        kafka.format();
        kafka.start_again();
        kafka
    }

    /// The bootstrap servers of this broker.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Crash: SIGKILL, no shutdown of any kind, then reap the process.
    pub fn kill(&mut self) {
        let mut broker = self.broker.take().expect("the broker is running");
        broker.kill().expect("kill -9 the broker");
        let status = broker.wait().expect("reap the broker");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL),
            "the broker was not killed by SIGKILL: {status:?}"
        );
    }

    /// Starts the broker on its existing data (after a kill it recovers its
    /// logs) and waits until it serves metadata with a leader for every
    /// partition it has.
    pub fn start_again(&mut self) {
        assert!(self.broker.is_none(), "the broker is already running");
        let stdout = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("stdout.log"))
            .expect("broker stdout log");
        let broker = Command::new("java")
            .args([
                "-Xms256m",
                "-Xmx512m",
                "-XX:+UseG1GC",
                "-Djava.awt.headless=true",
            ])
            .arg(format!("-Dkafka.logs.dir={}", self.dir.display()))
            .arg(format!(
                "-Dlog4j2.configurationFile={}",
                repo().join("scripts/kafka/log4j2.xml").display()
            ))
            .arg("-cp")
            .arg(format!("{}/*", libs_dir().display()))
            .arg("kafka.Kafka")
            .arg(self.config_path())
            .stdin(Stdio::null())
            .stdout(stdout.try_clone().expect("clone log handle"))
            .stderr(stdout)
            .spawn()
            .expect("start java kafka.Kafka");
        self.broker = Some(broker);
        self.wait_ready();
    }

    /// Creates a topic (replication 1).
    pub async fn topic(&self, partitions: i32) -> String {
        create_topic_at(&self.bootstrap(), "orders_private", partitions, &[]).await
    }

    /// The broker's own log, for failure messages.
    pub fn log_text(&self) -> String {
        let mut text = std::fs::read_to_string(self.dir.join("stdout.log")).unwrap_or_default();
        text += &std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        text
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("server.properties")
    }

    fn write_config(&self) {
        let (port, controller) = (self.port, self.controller_port);
        let config = format!(
            "process.roles=broker,controller\n\
             node.id=1\n\
             listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
             inter.broker.listener.name=PLAINTEXT\n\
             controller.listener.names=CONTROLLER\n\
             controller.quorum.bootstrap.servers=127.0.0.1:{controller}\n\
             log.dirs={}\n\
             auto.create.topics.enable=false\n\
             offsets.topic.replication.factor=1\n\
             offsets.topic.num.partitions=3\n\
             transaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\n\
             transaction.state.log.num.partitions=3\n\
             share.coordinator.state.topic.replication.factor=1\n\
             share.coordinator.state.topic.min.isr=1\n\
             group.initial.rebalance.delay.ms=0\n\
             num.network.threads=2\n\
             num.io.threads=2\n",
            self.dir.join("data").display()
        );
        std::fs::write(self.config_path(), config).expect("write server.properties");
    }

    /// `kafka-storage format --standalone` with a fresh cluster id.
    fn format(&self) {
        // A Kafka Uuid is 16 bytes in unpadded URL-safe base64; one not
        // starting with '-' (which the tool would take for a flag).
        let cluster_id = loop {
            let id = base64_url(Uuid::new_v4().as_bytes());
            if !id.starts_with('-') {
                break id;
            }
        };
        let output = Command::new("java")
            .arg(format!(
                "-Dlog4j2.configurationFile={}",
                repo().join("scripts/kafka/tools-log4j2.xml").display()
            ))
            .arg("-cp")
            .arg(format!("{}/*", libs_dir().display()))
            .args(["kafka.tools.StorageTool", "format", "-t", &cluster_id, "-c"])
            .arg(self.config_path())
            .arg("--standalone")
            .output()
            .expect("run kafka.tools.StorageTool");
        assert!(
            output.status.success(),
            "formatting the private broker's storage failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Waits until the broker answers a metadata request and every partition
    /// it reports has a leader (after a kill, until its logs are recovered).
    fn wait_ready(&mut self) {
        let client: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.bootstrap())
            .set("group.id", unique("ready-check"))
            .create()
            .expect("metadata client");
        let started = Instant::now();
        loop {
            if let Some(status) = self
                .broker
                .as_mut()
                .and_then(|b| b.try_wait().expect("try_wait"))
            {
                panic!(
                    "the private broker exited during start-up ({status:?}):\n{}",
                    self.log_text()
                );
            }
            let ready = client
                .fetch_metadata(None, Duration::from_secs(2))
                .is_ok_and(|metadata| {
                    !metadata.brokers().is_empty()
                        && metadata.topics().iter().all(|topic| {
                            topic.error().is_none()
                                && topic.partitions().iter().all(|p| p.leader() >= 0)
                        })
                });
            if ready {
                return;
            }
            assert!(
                started.elapsed() < READY_TIMEOUT,
                "the private broker did not answer within {READY_TIMEOUT:?}:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for PrivateKafka {
    fn drop(&mut self) {
        if let Some(mut broker) = self.broker.take() {
            let _ = broker.kill();
            let _ = broker.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn libs_dir() -> PathBuf {
    repo().join(".local/kafka/libs")
}

/// Unpadded URL-safe base64 (RFC 4648 §5).
fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}
