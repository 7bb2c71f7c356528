//! A TCP proxy on loopback between a client and a server that counts round
//! trips: a round trip begins each time the client sends after the server
//! last spoke (however many segments either side's bytes arrive in). A
//! request/response protocol such as PostgreSQL's thus counts one per
//! exchange, and pipelined messages sent before the answer count once.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{produce, producer, wait_all_committed, ConsumerProcess, ConsumerSpec, Outgoing};

pub struct CountingProxy {
    pub port: u16,
    round_trips: Arc<AtomicU64>,
    /// While true, bytes either way are swallowed: connections stay open,
    /// nothing arrives, no reset (a network that drops every packet).
    silent: Arc<AtomicBool>,
    /// While true, the server's bytes are swallowed: what the client sends
    /// arrives (and is done), its answers are lost.
    deaf: Arc<AtomicBool>,
    accept: tokio::task::JoinHandle<()>,
}

impl CountingProxy {
    /// Listens on a free loopback port and forwards every connection to
    /// `target`.
    pub async fn start(target: SocketAddr) -> CountingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let round_trips = Arc::new(AtomicU64::new(0));
        let silent = Arc::new(AtomicBool::new(false));
        let deaf = Arc::new(AtomicBool::new(false));
        let (counter, quiet, unheard) = (round_trips.clone(), silent.clone(), deaf.clone());
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (counter, quiet, unheard) = (counter.clone(), quiet.clone(), unheard.clone());
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(target).await {
                        forward(client, server, counter, quiet, unheard).await;
                    }
                });
            }
        });
        CountingProxy {
            port,
            round_trips,
            silent,
            deaf,
            accept,
        }
    }

    /// From now on (`true`) the server's answers are lost on their way,
    /// until `false`.
    pub fn lose_answers(&self, lost: bool) {
        self.deaf.store(lost, Ordering::SeqCst);
    }

    /// From now on (`true`) nothing goes through either way, until `false`.
    pub fn silence(&self, silent: bool) {
        self.silent.store(silent, Ordering::SeqCst);
    }

    /// Round trips of every connection so far.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::SeqCst)
    }

    /// Round trips per steady-state batch of `consumer` (its database
    /// connection through this proxy): `warm_up` first (connections opened,
    /// statements prepared, the window read: not steady), then `steady` ten
    /// records every 20 ms, so that batches stay small and many, as at 1,400
    /// events/s spread over the partitions; the exchanges counted meanwhile
    /// over the batches committed.
    pub async fn per_steady_batch(
        &self,
        consumer: &ConsumerProcess,
        spec: &ConsumerSpec,
        topic: &str,
        partitions: i32,
        warm_up: &[Outgoing],
        steady: &[Outgoing],
    ) -> f64 {
        let all_committed = |n: usize| {
            wait_all_committed(
                &spec.group,
                topic,
                partitions,
                n as i64,
                Duration::from_secs(60),
            )
        };
        produce(&producer(), topic, warm_up).await;
        all_committed(warm_up.len()).await;
        let batches = || async { consumer.metric("inbox_batch_size_count").await };
        let (trips_before, batches_before) = (self.round_trips(), batches().await);
        let producer = producer();
        for chunk in steady.chunks(10) {
            produce(&producer, topic, chunk).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        all_committed(warm_up.len() + steady.len()).await;
        let trips = self.round_trips() - trips_before;
        let committed = batches().await - batches_before;
        assert!(committed >= 20.0, "enough batches to measure: {committed}");
        let per_batch = trips as f64 / committed;
        eprintln!("{trips} round trips for {committed} batches: {per_batch:.2} per batch");
        per_batch
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn forward(
    client: TcpStream,
    server: TcpStream,
    round_trips: Arc<AtomicU64>,
    silent: Arc<AtomicBool>,
    deaf: Arc<AtomicBool>,
) {
    let silent_down = silent.clone();
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // True when the server's bytes are the last that went through: the
    // client's next bytes begin a round trip.
    let server_spoke_last = Arc::new(AtomicBool::new(true));
    let server_spoke = server_spoke_last.clone();
    let upstream = async move {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match client_read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(_) if silent.load(Ordering::SeqCst) => {}
                Ok(n) => {
                    if server_spoke_last.swap(false, Ordering::SeqCst) {
                        round_trips.fetch_add(1, Ordering::SeqCst);
                    }
                    if server_write.write_all(&buffer[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = server_write.shutdown().await;
    };
    let downstream = async move {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match server_read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(_) if silent_down.load(Ordering::SeqCst) || deaf.load(Ordering::SeqCst) => {}
                Ok(n) => {
                    // Marked before the client can see the bytes and answer.
                    server_spoke.store(true, Ordering::SeqCst);
                    if client_write.write_all(&buffer[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = client_write.shutdown().await;
    };
    tokio::join!(upstream, downstream);
}

/// A TCP endpoint in front of a database, as a cluster endpoint's DNS name is:
/// it forwards new connections to its current target, and on a switch cuts
/// the connections it carries, as a failed primary does.
pub struct Endpoint {
    pub port: u16,
    target: Arc<std::sync::Mutex<SocketAddr>>,
    connections: Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Endpoint {
    pub async fn start(target: SocketAddr) -> Endpoint {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind endpoint");
        let port = listener.local_addr().expect("endpoint address").port();
        let target = Arc::new(std::sync::Mutex::new(target));
        let connections = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (current, carried) = (target.clone(), connections.clone());
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let to = *current.lock().unwrap();
                let task = tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(to).await {
                        let (trips, silent, deaf) = Default::default();
                        forward(client, server, trips, silent, deaf).await;
                    }
                });
                carried.lock().unwrap().push(task);
            }
        });
        Endpoint {
            port,
            target,
            connections,
            accept,
        }
    }

    /// New connections go to `target`; those carried so far are cut.
    pub fn switch(&self, target: SocketAddr) {
        *self.target.lock().unwrap() = target;
        for task in self.connections.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.accept.abort();
        for task in self.connections.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}
