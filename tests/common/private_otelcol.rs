//! An OpenTelemetry Collector of one test's own, to receive what the service
//! exports over OTLP and show it to the test.
//!
//! It is a real collector (`tools/otelcol`, built by `scripts/otelcol.sh
//! build`, which `make test-deps` runs; built here when it is missing or
//! stale): the OTLP receiver on two free loopback ports (gRPC and HTTP), and
//! the file exporter writing every batch of spans as one OTLP JSON line to a
//! file in a fresh directory, which `spans` reads back. The collector's own
//! metrics are off, so no collector binds the default 8888 and any number
//! run side by side. Dropping it kills the process and removes the
//! directory. Anything that keeps it from starting FAILS the test, it never
//! skips.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use uuid::Uuid;

use super::free_port;

/// Longest wait for both OTLP ports to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the file exporter writes out what it buffered: what a test
/// waits at most beyond the collector's own handling.
const FLUSH_INTERVAL: &str = "100ms";
/// How many spans a timed-out wait shows in full.
const SPANS_SHOWN: usize = 20;

/// A running private collector.
pub struct PrivateCollector {
    /// Holds `config.json`, `spans.jsonl` and `collector.log`; removed on drop.
    dir: PathBuf,
    grpc_port: u16,
    http_port: u16,
    process: Child,
}

impl PrivateCollector {
    /// Writes the config, starts the collector and returns once both OTLP
    /// ports accept connections (the receiver starts after the exporters, so
    /// by then a span sent is a span written).
    pub fn start() -> PrivateCollector {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("inbox-otelcol-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("private collector dir");
        let (grpc_port, http_port) = (free_port(), free_port());
        let config = config(grpc_port, http_port, &dir.join("spans.jsonl"));
        let config_path = dir.join("config.json");
        std::fs::write(
            &config_path,
            serde_json::to_string_pretty(&config).expect("config JSON"),
        )
        .expect("write the collector config");
        let log = std::fs::File::create(dir.join("collector.log")).expect("collector log");
        let process = Command::new(collector_binary())
            .arg("--config")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("collector log"))
            .stderr(log)
            .spawn()
            .expect("start the collector");
        let mut collector = PrivateCollector {
            dir,
            grpc_port,
            http_port,
            process,
        };
        collector.wait_ready();
        collector
    }

    /// The OTLP/HTTP endpoint, e.g. `http://127.0.0.1:4318` (traces are
    /// posted to `/v1/traces` under it).
    pub fn http_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// The OTLP/gRPC endpoint, e.g. `http://127.0.0.1:4317`.
    pub fn grpc_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// Every span received so far, in the order written: the OTLP JSON span
    /// objects (`name`, `traceId`, `attributes`, …), each with two more keys,
    /// `resource` and `scope`, copied from its `resourceSpans` and
    /// `scopeSpans`. Read `attributes` with [`attribute`].
    pub fn spans(&self) -> Vec<Value> {
        let path = self.spans_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            // The exporter creates the file when it starts.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(error) => panic!("read {}: {error}", path.display()),
        };
        // A flush may end in the middle of a line: only whole lines count.
        let complete = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
        complete
            .lines()
            .flat_map(|line| {
                let export: Value = serde_json::from_str(line).unwrap_or_else(|error| {
                    panic!("the collector wrote a line that is not JSON ({error}): {line}")
                });
                flatten(&export)
            })
            .collect()
    }

    /// Polls `spans` until `predicate` holds over them and returns them;
    /// panics after `timeout` with the spans it saw and the collector's log.
    pub async fn wait_for_spans<P>(&self, timeout: Duration, mut predicate: P) -> Vec<Value>
    where
        P: FnMut(&[Value]) -> bool,
    {
        let started = Instant::now();
        loop {
            let spans = self.spans();
            if predicate(&spans) {
                return spans;
            }
            if started.elapsed() >= timeout {
                let more = spans.len().saturating_sub(SPANS_SHOWN);
                panic!(
                    "timed out after {timeout:?} waiting for spans; the collector has {} spans:\n{}{}\ncollector log:\n{}",
                    spans.len(),
                    spans
                        .iter()
                        .take(SPANS_SHOWN)
                        .map(Value::to_string)
                        .collect::<Vec<_>>()
                        .join("\n"),
                    if more > 0 { format!("\n… and {more} more") } else { String::new() },
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The collector's own log (its stdout and stderr); the debug exporter
    /// adds one line per batch received.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("collector.log")).unwrap_or_default()
    }

    fn spans_path(&self) -> PathBuf {
        self.dir.join("spans.jsonl")
    }

    /// Waits until both OTLP ports accept connections; fails the test, with
    /// the log, if the collector exits or does not get there in time.
    fn wait_ready(&mut self) {
        let started = Instant::now();
        let accepts = |port: u16| {
            std::net::TcpStream::connect_timeout(
                &([127, 0, 0, 1], port).into(),
                Duration::from_millis(200),
            )
            .is_ok()
        };
        loop {
            if let Some(status) = self.process.try_wait().expect("poll the collector") {
                panic!(
                    "the collector exited at start ({status}); log:\n{}",
                    self.log()
                );
            }
            if accepts(self.grpc_port) && accepts(self.http_port) {
                return;
            }
            assert!(
                started.elapsed() < READY_TIMEOUT,
                "the collector's OTLP ports {} (gRPC) and {} (HTTP) did not accept connections within {READY_TIMEOUT:?}; log:\n{}",
                self.grpc_port,
                self.http_port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PrivateCollector {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The value of attribute `key` in an OTLP JSON object that has
/// `attributes` (a span, or a span's `resource`): the AnyValue's content,
/// e.g. `"kafka"` for `{"stringValue": "kafka"}`. OTLP JSON writes
/// `intValue` as a string: `"42"`.
pub fn attribute<'a>(item: &'a Value, key: &str) -> Option<&'a Value> {
    let value = item["attributes"]
        .as_array()?
        .iter()
        .find(|attribute| attribute["key"] == key)?
        .get("value")?;
    value.as_object()?.values().next()
}

/// The collector's config: OTLP in on the two ports, traces out to
/// `spans_file` as OTLP JSON lines (and counted in the log), no internal
/// metrics endpoint. JSON is YAML, which the collector reads.
fn config(grpc_port: u16, http_port: u16, spans_file: &Path) -> Value {
    json!({
        "receivers": {
            "otlp": {
                "protocols": {
                    "grpc": { "endpoint": format!("127.0.0.1:{grpc_port}") },
                    "http": { "endpoint": format!("127.0.0.1:{http_port}") }
                }
            }
        },
        "exporters": {
            "file": {
                "path": spans_file,
                "format": "json",
                "flush_interval": FLUSH_INTERVAL
            },
            "debug": { "verbosity": "basic" }
        },
        "service": {
            // The default would serve the collector's metrics on :8888.
            "telemetry": { "metrics": { "level": "none" } },
            "pipelines": {
                "traces": { "receivers": ["otlp"], "exporters": ["file", "debug"] }
            }
        }
    })
}

/// The spans of one exported `{"resourceSpans": [...]}` line, each with its
/// `resource` and `scope`.
fn flatten(export: &Value) -> Vec<Value> {
    let mut spans = Vec::new();
    for resource_spans in export["resourceSpans"].as_array().into_iter().flatten() {
        for scope_spans in resource_spans["scopeSpans"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for span in scope_spans["spans"].as_array().into_iter().flatten() {
                let mut span = span.clone();
                span["resource"] = resource_spans["resource"].clone();
                span["scope"] = scope_spans["scope"].clone();
                spans.push(span);
            }
        }
    }
    spans
}

/// The collector built by `scripts/otelcol.sh build` (once per test binary:
/// a no-op when it is up to date, the full build when missing or stale).
fn collector_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/otelcol.sh");
        let output = Command::new(&script)
            .arg("build")
            .output()
            .unwrap_or_else(|error| panic!("run {}: {error}", script.display()));
        assert!(
            output.status.success(),
            "`scripts/otelcol.sh build` failed ({}); `make test-deps` builds the collector:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        assert!(
            path.is_file(),
            "`scripts/otelcol.sh build` printed {}, which is not a file",
            path.display()
        );
        path
    })
}
