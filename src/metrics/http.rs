//! The small HTTP endpoint that serves the metrics with `/healthz` and
//! `/readyz` (hyper's HTTP/1 server, within `Limits`: a slow or silent
//! client is closed after a header timeout, connections are bounded, and a
//! failing accept backs off instead of spinning).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::Metrics;
use crate::shutdown::Shutdown;

/// The bounds of the HTTP endpoint. It serves a scraper or two and the
/// probes: a handful of connections at once is the norm.
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// A connection that has not sent a whole request head this long after
    /// it opened, or after its last answer (an idle keep-alive), is closed
    /// without an answer: a slow or silent client holds its place no longer.
    header_timeout: Duration,
    /// Connections served at once. One more is closed as soon as it is
    /// accepted, not queued behind the others: descriptors and memory stay
    /// bounded, and its client (a scraper at its next interval) gets a place
    /// once a header timeout has freed one.
    connections: usize,
    /// The longest a connection lives, whatever it is doing: the header
    /// timeout does not cover a client that never reads its answer.
    lifetime: Duration,
}

const LIMITS: Limits = Limits {
    header_timeout: Duration::from_secs(5),
    connections: 64,
    lifetime: Duration::from_secs(60),
};

/// The pause after a failed accept: with the descriptor table full (EMFILE)
/// every accept fails at once until a connection closes.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `/metrics`, `/healthz` and `/readyz` within `LIMITS` until
/// `finished`; then stops accepting, closes every connection (a scrape in
/// progress is cut) and returns once their tasks have ended.
pub async fn serve(listener: TcpListener, metrics: Metrics, finished: Shutdown) {
    serve_within(listener, metrics, finished, LIMITS).await
}

async fn serve_within(listener: TcpListener, metrics: Metrics, finished: Shutdown, limits: Limits) {
    let mut connections = JoinSet::new();
    tokio::select! {
        _ = finished.asked() => {}
        () = accept(&listener, &metrics, limits, &mut connections) => {}
    }
    connections.shutdown().await;
}

/// Accepts connections until dropped, each served by a task in
/// `connections`.
async fn accept(
    listener: &TcpListener,
    metrics: &Metrics,
    limits: Limits,
    connections: &mut JoinSet<()>,
) {
    let mut accept_failed = Throttled::default();
    let mut over_limit = Throttled::default();
    loop {
        let accepted = listener.accept().await;
        // Connections that have closed give up their places.
        while let Some(ended) = connections.try_join_next() {
            if let Err(error) = ended {
                tracing::warn!(%error, "a metrics endpoint connection ended abnormally");
            }
        }
        match accepted {
            Err(error) => {
                if let Some(suppressed) = accept_failed.due(Instant::now()) {
                    tracing::warn!(%error, suppressed, "the metrics endpoint could not accept a connection; retrying in {ACCEPT_BACKOFF:?}");
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
            Ok((socket, peer)) if connections.len() >= limits.connections => {
                drop(socket);
                if let Some(suppressed) = over_limit.due(Instant::now()) {
                    tracing::warn!(%peer, suppressed, limit = limits.connections, "the metrics endpoint serves as many connections as it may; closed a new one");
                }
            }
            Ok((socket, _)) => {
                connections.spawn(serve_connection(socket, metrics.clone(), limits));
            }
        }
    }
}

/// Serves one connection's requests until the client closes it, its header
/// timeout passes, or its lifetime ends.
async fn serve_connection(socket: TcpStream, metrics: Metrics, limits: Limits) {
    let answer = service_fn(move |request: Request<Incoming>| {
        std::future::ready(Ok::<_, Infallible>(answer(&metrics, request.uri().path())))
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(TokioIo::new(socket), answer);
    match tokio::time::timeout(limits.lifetime, connection).await {
        Ok(Ok(())) => {}
        // A header timeout, a malformed request, a client gone: the client's
        // business, not the service's.
        Ok(Err(error)) => tracing::debug!(%error, "a metrics endpoint connection closed"),
        Err(_) => {
            tracing::debug!("a metrics endpoint connection closed at the end of its lifetime")
        }
    }
}

/// The answer for `path`, whatever the method (to a HEAD, hyper sends the
/// head only).
fn answer(metrics: &Metrics, path: &str) -> Response<Full<Bytes>> {
    const TEXT: &str = "text/plain";
    let readiness = &metrics.readiness;
    let (status, content_type, body) = match path {
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.render(),
        ),
        "/healthz" => (StatusCode::OK, TEXT, "ok\n".to_owned()),
        "/readyz" if readiness.is_ready() => (StatusCode::OK, TEXT, "ready\n".to_owned()),
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            TEXT,
            format!(
                "not ready: partitions_assigned={} database_reachable={} draining={} consume_failing={} poison_breaker_open={}\n",
                readiness.partitions_assigned.load(Ordering::Relaxed),
                readiness.database_reachable.load(Ordering::Relaxed),
                readiness.draining.load(Ordering::Relaxed),
                readiness.consume_failing.load(Ordering::Relaxed),
                readiness.breaker_open.load(Ordering::Relaxed)
            ),
        ),
        _ => (StatusCode::NOT_FOUND, TEXT, "not found\n".to_owned()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A warning written at most once a second however often its cause recurs
/// (a full descriptor table fails thousands of accepts a second); each line
/// counts the occurrences left unwritten since the one before.
#[derive(Default)]
struct Throttled {
    last_written: Option<Instant>,
    suppressed: u64,
}

impl Throttled {
    const EVERY: Duration = Duration::from_secs(1);

    /// Whether to write this occurrence: then how many went unwritten
    /// before it.
    fn due(&mut self, now: Instant) -> Option<u64> {
        if self
            .last_written
            .is_some_and(|last| now.duration_since(last) < Self::EVERY)
        {
            self.suppressed += 1;
            return None;
        }
        self.last_written = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// Binds the metrics address; a clear error when it is taken.
pub async fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(address).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn a_recurring_warning_is_written_once_a_second_with_the_count_it_folded() {
        let mut throttled = Throttled::default();
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        assert_eq!(throttled.due(at(0)), Some(0));
        assert_eq!(throttled.due(at(10)), None);
        assert_eq!(throttled.due(at(999)), None);
        assert_eq!(throttled.due(at(1_000)), Some(2));
        assert_eq!(throttled.due(at(5_000)), Some(0));
    }

    /// A server on a free loopback port and the means to stop it.
    struct Endpoint {
        address: SocketAddr,
        metrics: Metrics,
        finish: crate::shutdown::Trigger,
        server: tokio::task::JoinHandle<()>,
    }

    async fn start(limits: Limits) -> Endpoint {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let address = listener.local_addr().unwrap();
        let metrics = Metrics::new();
        let (finish, finished) = crate::shutdown::channel();
        let server = tokio::spawn(serve_within(listener, metrics.clone(), finished, limits));
        Endpoint {
            address,
            metrics,
            finish,
            server,
        }
    }

    /// What a server answered: status, `Content-Type`, body.
    type Answer = (u16, String, String);

    /// One request as a plain HTTP/1.0 client sends it (like the tests'
    /// and the load generator's scrapers); None when the connection is
    /// closed or refused without an answer.
    async fn request(address: SocketAddr, method: &str, path: &str) -> Option<Answer> {
        let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
        stream
            .write_all(format!("{method} {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.ok()?;
        let response = String::from_utf8(response).ok()?;
        let (head, body) = response.split_once("\r\n\r\n")?;
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        let content_type = head.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_owned())
        })?;
        Some((status, content_type, body.to_owned()))
    }

    /// Whether the server closed the connection without a byte of answer
    /// (an orderly close, or a reset when it closed unread input).
    async fn closed_without_answer(stream: &mut tokio::net::TcpStream) -> bool {
        let mut answer = Vec::new();
        match stream.read_to_end(&mut answer).await {
            Ok(_) => answer.is_empty(),
            Err(error) => error.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }

    const TEXT: &str = "text/plain";
    const EXPOSITION: &str = "text/plain; version=0.0.4; charset=utf-8";

    #[tokio::test]
    async fn the_endpoints_answer_their_paths_with_their_statuses_and_bodies() {
        let endpoint = start(LIMITS).await;
        let get = |path| request(endpoint.address, "GET", path);

        let (status, content_type, body) = get("/metrics").await.unwrap();
        assert_eq!((status, content_type.as_str()), (200, EXPOSITION));
        assert!(body.contains("\ninbox_processed_total 0\n"), "{body}");
        assert_eq!(
            get("/healthz").await,
            Some((200, TEXT.into(), "ok\n".into()))
        );
        assert_eq!(
            get("/readyz").await,
            Some((
                503,
                TEXT.into(),
                "not ready: partitions_assigned=false database_reachable=false draining=false consume_failing=false poison_breaker_open=false\n"
                    .into()
            ))
        );
        let readiness = &endpoint.metrics.readiness;
        readiness.partitions_assigned.store(true, Ordering::Relaxed);
        readiness.database_reachable.store(true, Ordering::Relaxed);
        assert_eq!(
            get("/readyz").await,
            Some((200, TEXT.into(), "ready\n".into()))
        );
        assert_eq!(
            get("/nothing").await,
            Some((404, TEXT.into(), "not found\n".into()))
        );
        // The path alone picks the answer: not the method, not a query.
        for (method, path) in [("POST", "/healthz"), ("GET", "/healthz?probe=1")] {
            assert_eq!(
                request(endpoint.address, method, path).await,
                Some((200, TEXT.into(), "ok\n".into())),
                "{method} {path}"
            );
        }
        let mut garbage = tokio::net::TcpStream::connect(endpoint.address)
            .await
            .unwrap();
        garbage.write_all(b"NOT HTTP\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        garbage.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
        endpoint.finish.ask();
        endpoint.server.await.unwrap();
    }

    #[tokio::test]
    async fn slow_clients_beyond_the_connection_limit_do_not_starve_the_scrape() {
        let limits = Limits {
            header_timeout: Duration::from_secs(1),
            connections: 4,
            ..LIMITS
        };
        let endpoint = start(limits).await;
        // Three times the limit: half send half a request line, half
        // nothing at all, and then they wait.
        let opened = Instant::now();
        let mut slow = Vec::new();
        for n in 0..3 * limits.connections {
            let mut stream = tokio::net::TcpStream::connect(endpoint.address)
                .await
                .unwrap();
            if n % 2 == 0 {
                stream.write_all(b"GET /metrics HT").await.unwrap();
            }
            slow.push(stream);
        }

        // A scraper retries a refused connection at its next interval; here
        // every 50 ms. It is answered once the header timeout has freed a
        // place, long before this bound.
        let scrape = async {
            loop {
                match request(endpoint.address, "GET", "/metrics").await {
                    Some((200, _, body)) => return body,
                    _ => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        };
        let body = tokio::time::timeout(Duration::from_secs(20), scrape)
            .await
            .expect("the scrape is answered despite the slow clients");
        assert!(body.contains("inbox_processed_total"));

        // Each slow client is closed without an answer: the first ones,
        // accepted in the order they connected, after the header timeout;
        // those over the limit at once.
        for (n, stream) in slow.iter_mut().enumerate() {
            let closed =
                tokio::time::timeout(Duration::from_secs(20), closed_without_answer(stream))
                    .await
                    .unwrap_or_else(|_| panic!("slow client {n} is still open"));
            assert!(closed, "slow client {n} was answered");
            if n < limits.connections {
                assert!(opened.elapsed() >= limits.header_timeout);
            }
        }
        endpoint.finish.ask();
        endpoint.server.await.unwrap();
    }

    #[tokio::test]
    async fn shutdown_closes_open_connections_and_ends_the_server() {
        // A header timeout longer than the test: only shutdown can close it.
        let limits = Limits {
            header_timeout: Duration::from_secs(600),
            ..LIMITS
        };
        let endpoint = start(limits).await;
        let mut idle = tokio::net::TcpStream::connect(endpoint.address)
            .await
            .unwrap();
        idle.write_all(b"GET /hea").await.unwrap();
        // The server serves it (the endpoint answers others meanwhile).
        assert!(request(endpoint.address, "GET", "/healthz").await.is_some());
        endpoint.finish.ask();
        tokio::time::timeout(Duration::from_secs(10), endpoint.server)
            .await
            .expect("the server ends at shutdown")
            .unwrap();
        assert!(closed_without_answer(&mut idle).await);
    }
}
