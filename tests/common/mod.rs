//! Helpers shared by the integration tests: the real services (checked, never
//! mocked), a fresh topic and a fresh database per test, events built with the
//! service's own types, and the consumer run as a real process.
//!
//! A missing service FAILS the test with a message saying how to start it.
//!
//! Layout: `db` (a database per test), `kafka` (topics, producing, committed
//! offsets), `consumer` (the binary as a process), `traffic` (paced load,
//! checked exactly once), `private_*` (servers of one test's own), `proxy` (a
//! counting TCP proxy), `test_ca` (a CA and certificates made with openssl).

// Each test binary compiles this module and uses a part of it.
#![allow(dead_code)]

mod consumer;
mod db;
mod kafka;
pub mod private_kafka;
pub mod private_kafka_secure;
pub mod private_otelcol;
pub mod private_pg;
pub mod private_pgbouncer;
pub mod proxy;
pub mod test_ca;
mod traffic;

// One `use common::*` gives a test everything; each uses a part.
#[allow(unused_imports)]
pub use {consumer::*, db::*, kafka::*, traffic::*};

use std::future::Future;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use uuid::Uuid;

/// The shared broker the tests use: `INBOX_TEST_KAFKA` (`make compat` points
/// it at a broker of another Kafka version on a port of its own), else the
/// local broker of `scripts/services.sh up`.
pub fn kafka() -> &'static str {
    static ADDRESS: OnceLock<String> = OnceLock::new();
    ADDRESS.get_or_init(|| {
        std::env::var("INBOX_TEST_KAFKA").unwrap_or_else(|_| "127.0.0.1:9092".to_owned())
    })
}
/// The owner role of the default DATABASE_URL (docs/design.md#configuration); it may create databases.
pub const ADMIN_URL: &str = "postgres://inventory:inventory@127.0.0.1:5432/inventory";

/// Fails (never skips) when PostgreSQL or Kafka is not reachable.
pub fn require_services() {
    for (name, address) in [("PostgreSQL", "127.0.0.1:5432"), ("Kafka", kafka())] {
        let reachable = std::net::TcpStream::connect_timeout(
            &address.parse().expect("address"),
            Duration::from_secs(2),
        )
        .is_ok();
        assert!(
            reachable,
            "{name} is not reachable on {address}: run `scripts/services.sh up` (make test does)"
        );
    }
}

/// Waits until `condition` holds, polling; panics with `what` after `timeout`.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !condition().await {
        assert!(
            started.elapsed() < timeout,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A unique name for a test resource.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", Uuid::new_v4().simple())
}

/// The service binary built by cargo for these tests.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_inventory-inbox"))
}

/// A free loopback port.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// A GET over HTTP/1.0 (a plain body until the server closes: no chunked
/// encoding to undo): status and body, or None when nothing answers.
pub async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok()?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}
