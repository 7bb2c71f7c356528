//! `inventory-inbox console`: the operator console in the browser
//! (docs/operations.md#console). Server-rendered HTML on the service's HTTP
//! stack (hyper), no JavaScript.
//!
//! Invariants:
//! - Every verdict and every action is a function of the store or of
//!   [`crate::operator`] that the CLI calls too (`parked list|replay`,
//!   `inspect`, `positions list|set`, `breaker status|resume`): the console
//!   and the CLI cannot disagree.
//! - Read-only unless INBOX_CONSOLE_TOKEN is set and the browser signed in
//!   ([`session`]); every action is a POST carrying the session's CSRF
//!   token, asks for a confirmation that says what it will touch, and is
//!   logged (what, which records, from where) and counted
//!   (`inbox_console_actions_total`). Payloads and headers are shown only
//!   to a signed-in browser.
//! - A database or a cluster that is down is a message on the page, and
//!   the page renders what it can: every look-up has a deadline.
//! - No request runs long: a replay of a group too large for one runs
//!   beside the requests ([`group_replay`]), one at a time, its progress
//!   on a page; the console's end stops it between two records and waits
//!   for it.

mod group_replay;
mod pages;
mod session;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDate;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus::{Encoder, IntCounterVec, Opts, Registry, TextEncoder};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::config::{ConfigError, ConsoleArgs, OffsetTarget};
use crate::event::ParkReason;
use crate::inspect::{self, Subject, TopicReader};
use crate::kafka::{cluster, KafkaSettings};
use crate::operator;
use crate::store::{self, positions, DbPool, ParkedFilter, ReplayOutcome};

use session::{Sessions, Standing};

/// Longest a page waits for the database or the cluster before it says
/// so and renders the rest.
const LOOK_UP_WITHIN: Duration = Duration::from_secs(5);
/// Longest the overview waits for the oldest unread record of each
/// partition (lag in seconds); within [`LOOK_UP_WITHIN`], so that those
/// that came are shown.
const OLDEST_UNREAD_WITHIN: Duration = Duration::from_secs(3);
/// Maintenance runs listed on the overview (and the last that did the
/// work, when older).
const MAINTENANCE_RUNS_SHOWN: i64 = 5;
/// Largest form body taken.
const MOST_BODY_BYTES: usize = 64 * 1024;
/// Parked records on one page of the list.
const PAGE_RECORDS: i64 = 50;
/// Parked records a group is counted up to ("at least" beyond): as
/// `parked list` counts.
const GROUP_COUNTED_UP_TO: i64 = 100_000;
/// Connections served at once.
const MOST_CONNECTIONS: usize = 32;

/// Errors that stop the console's start.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("INBOX_CONSOLE_ADDR {address}: cannot listen: {error}")]
    Bind {
        address: SocketAddr,
        error: std::io::Error,
    },
}

/// What every request is served with.
pub(crate) struct Console {
    pool: DbPool,
    kafka: KafkaSettings,
    consumer: String,
    topic: String,
    group: String,
    sessions: Sessions,
    registry: Registry,
    /// `inbox_console_actions_total{action, result}`: each action done or
    /// refused.
    actions: IntCounterVec,
    /// A replay of a group too large for a request, running beside them.
    group_replays: group_replay::GroupReplays,
    /// The client of Kafka's look-ups, kept across requests (see
    /// [`cluster::LookUpClient`]); made again after one fails.
    look_up: Kept<cluster::LookUpClient>,
}

/// A value made at its first use and kept, until forgotten.
struct Kept<T>(std::sync::Mutex<Option<Arc<T>>>);

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept(std::sync::Mutex::new(None))
    }
}

impl<T> Kept<T> {
    /// The kept value, or a new one `make` gives (kept when it is one).
    fn get_or_make<E>(&self, make: impl FnOnce() -> Result<T, E>) -> Result<Arc<T>, E> {
        let mut kept = self.0.lock().expect("kept value lock");
        if let Some(value) = kept.as_ref() {
            return Ok(value.clone());
        }
        let value = Arc::new(make()?);
        *kept = Some(value.clone());
        Ok(value)
    }

    /// The next use makes a new value.
    fn forget(&self) {
        *self.0.lock().expect("kept value lock") = None;
    }
}

/// Serves the console on INBOX_CONSOLE_ADDR until SIGTERM or SIGINT.
pub async fn run(args: ConsoleArgs) -> Result<(), ConsoleError> {
    args.validate()?;
    let run = &args.run;
    let kafka = run.kafka_settings(std::env::vars())?;
    let pool = store::connect_lazy(run.database.connection(), 1)
        .map_err(|error| ConfigError(error.to_string()))?
        .answer_within(LOOK_UP_WITHIN);
    let registry = Registry::new();
    let actions = IntCounterVec::new(
        Opts::new(
            "inbox_console_actions_total",
            "Console actions (replay, positions_set, breaker_resume, sign_in), by result (done or refused).",
        ),
        &["action", "result"],
    )
    .expect("a valid metric");
    registry
        .register(Box::new(actions.clone()))
        .expect("registered once");
    let console = Arc::new(Console {
        pool,
        kafka,
        consumer: run.inbox_consumer_name.clone(),
        topic: run.kafka_topic.clone(),
        group: run.kafka_group_id.clone(),
        sessions: Sessions::new(args.token()),
        registry,
        actions,
        group_replays: group_replay::GroupReplays::default(),
        look_up: Kept::default(),
    });
    let address = args.inbox_console_addr;
    let listener = TcpListener::bind(address)
        .await
        .map_err(|error| ConsoleError::Bind { address, error })?;
    tracing::info!(
        address = %listener.local_addr().unwrap_or(address),
        read_only = args.token().is_none(),
        consumer = %console.consumer,
        topic = %console.topic,
        "the console listens"
    );
    let mut connections = JoinSet::new();
    tokio::select! {
        () = stop_signal() => {}
        () = accept(&listener, &console, &mut connections) => {}
    }
    connections.shutdown().await;
    console.group_replays.stop().await;
    console.pool.close().await;
    Ok(())
}

async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

async fn accept(listener: &TcpListener, console: &Arc<Console>, connections: &mut JoinSet<()>) {
    loop {
        let accepted = listener.accept().await;
        while connections.try_join_next().is_some() {}
        match accepted {
            Err(error) => {
                tracing::warn!(%error, "the console could not accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok((socket, _)) if connections.len() >= MOST_CONNECTIONS => drop(socket),
            Ok((socket, peer)) => {
                let console = console.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let console = console.clone();
                        async move { Ok::<_, Infallible>(answer(&console, request, peer).await) }
                    });
                    let connection = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(Duration::from_secs(10))
                        .serve_connection(TokioIo::new(socket), service);
                    if let Err(error) = connection.await {
                        tracing::debug!(%error, "a console connection closed");
                    }
                });
            }
        }
    }
}

/// A request as the pages read it.
pub(crate) struct Asked {
    method: Method,
    path: String,
    /// The query string's and the form's fields, in order.
    fields: Vec<(String, String)>,
    cookie: Option<String>,
    peer: SocketAddr,
}

impl Asked {
    /// The first non-empty value of `name`.
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, v)| k == name && !v.trim().is_empty())
            .map(|(_, v)| v.trim())
    }

    /// Every non-empty value of `name`.
    fn all(&self, name: &str) -> Vec<&str> {
        self.fields
            .iter()
            .filter(|(k, v)| k == name && !v.trim().is_empty())
            .map(|(_, v)| v.trim())
            .collect()
    }
}

/// What the console answers.
pub(crate) struct Reply {
    status: StatusCode,
    content_type: &'static str,
    body: String,
    headers: Vec<(hyper::header::HeaderName, String)>,
}

impl Reply {
    fn html(status: StatusCode, markup: maud::Markup) -> Reply {
        Reply {
            status,
            content_type: "text/html; charset=utf-8",
            body: markup.into_string(),
            headers: Vec::new(),
        }
    }

    fn redirect(to: &str) -> Reply {
        Reply {
            status: StatusCode::SEE_OTHER,
            content_type: "text/plain",
            body: String::new(),
            headers: vec![(LOCATION, to.to_owned())],
        }
    }
}

async fn answer(
    console: &Console,
    request: Request<Incoming>,
    peer: SocketAddr,
) -> Response<Full<Bytes>> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let mut fields: Vec<(String, String)> = request
        .uri()
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let cookie = request
        .headers()
        .get(COOKIE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let reply = match Limited::new(request.into_body(), MOST_BODY_BYTES)
        .collect()
        .await
    {
        Ok(body) => {
            fields.extend(form_urlencoded::parse(&body.to_bytes()).into_owned());
            let asked = Asked {
                method,
                path,
                fields,
                cookie,
                peer,
            };
            route(console, &asked).await
        }
        Err(_) => Reply {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            content_type: "text/plain",
            body: format!("a form of at most {MOST_BODY_BYTES} bytes\n"),
            headers: Vec::new(),
        },
    };
    let mut response = Response::builder()
        .status(reply.status)
        .header(CONTENT_TYPE, reply.content_type)
        .header(CACHE_CONTROL, "no-store")
        .header("X-Frame-Options", "DENY")
        .header("X-Content-Type-Options", "nosniff")
        .header(
            "Content-Security-Policy",
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'",
        )
        .header("Referrer-Policy", "no-referrer");
    for (name, value) in reply.headers {
        response = response.header(name, value);
    }
    response
        .body(Full::new(Bytes::from(reply.body)))
        .expect("a valid response")
}

async fn route(console: &Console, asked: &Asked) -> Reply {
    let standing = console.sessions.standing(asked.cookie.as_deref());
    let page = |title: &str, body: maud::Markup| -> Reply {
        Reply::html(StatusCode::OK, pages::layout(title, &standing, body))
    };
    match (&asked.method, asked.path.as_str()) {
        (&Method::GET, "/") => page("Overview", overview(console).await),
        (&Method::GET, "/parked") => page("Parked", parked(console, asked, &standing).await),
        (&Method::GET, "/parked/replaying") => replaying(console, &standing),
        (&Method::GET, path) if path.starts_with("/parked/") => {
            match path.trim_start_matches("/parked/").parse::<i64>() {
                Ok(id) => page(
                    &format!("Parked record {id}"),
                    record(console, id, &standing).await,
                ),
                Err(_) => not_found(&standing),
            }
        }
        (&Method::GET, "/search") => page("Search", search(console, asked).await),
        (&Method::GET, "/positions") => page("Positions", positions_page(console, &standing).await),
        (&Method::GET, "/breaker") => page("Breaker", breaker_page(console, &standing).await),
        (&Method::GET, "/signin") => page("Sign in", pages::sign_in(&standing, None)),
        (&Method::GET, "/metrics") => {
            let mut text = Vec::new();
            TextEncoder::new()
                .encode(&console.registry.gather(), &mut text)
                .expect("metrics encode");
            Reply {
                status: StatusCode::OK,
                content_type: "text/plain; version=0.0.4",
                body: String::from_utf8_lossy(&text).into_owned(),
                headers: Vec::new(),
            }
        }
        (&Method::POST, "/signin") => sign_in(console, asked, &standing),
        (&Method::POST, "/signout") => {
            console.sessions.sign_out(asked.cookie.as_deref());
            let mut reply = Reply::redirect("/");
            reply.headers.push((SET_COOKIE, session::clear_cookie()));
            reply
        }
        (&Method::POST, "/parked/replay") => act(console, asked, &standing, Action::Replay).await,
        (&Method::POST, "/positions/set") => {
            act(console, asked, &standing, Action::PositionsSet).await
        }
        (&Method::POST, "/breaker/resume") => {
            act(console, asked, &standing, Action::BreakerResume).await
        }
        (&Method::GET, _) => not_found(&standing),
        _ => Reply {
            status: StatusCode::METHOD_NOT_ALLOWED,
            content_type: "text/plain",
            body: "GET for pages, POST for actions\n".into(),
            headers: Vec::new(),
        },
    }
}

fn not_found(standing: &Standing) -> Reply {
    Reply::html(
        StatusCode::NOT_FOUND,
        pages::layout("Not found", standing, pages::message("No such page.")),
    )
}

/// A look-up with the console's deadline; its error as the page says it.
async fn within<T, E: std::fmt::Display>(
    what: &str,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(LOOK_UP_WITHIN, work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(format!("{what}: {error}")),
        Err(_) => Err(format!(
            "{what}: no answer within {} s",
            LOOK_UP_WITHIN.as_secs()
        )),
    }
}

impl Console {
    /// The database, once it answers; else why not (said once per page,
    /// instead of once per look-up after a wait each).
    async fn database(&self) -> Result<&DbPool, String> {
        within("database", self.pool.reachable()).await?;
        Ok(&self.pool)
    }

    async fn kafka_offsets(&self) -> Result<Vec<cluster::PartitionOffsets>, String> {
        let what = format!("Kafka ({})", self.kafka.bootstrap_servers);
        let client = self
            .look_up_client()
            .map_err(|why| format!("{what}: {why}"))?;
        let offsets = within(&what, cluster::offsets_with(client, &self.topic)).await;
        if offsets.is_err() {
            self.forget_look_up_client();
        }
        offsets
    }

    async fn group_members(&self) -> Result<(String, Vec<cluster::GroupMember>), String> {
        let client = self
            .look_up_client()
            .map_err(|why| format!("Kafka group: {why}"))?;
        let members = within("Kafka group", cluster::members_with(client, &self.group)).await;
        if members.is_err() {
            self.forget_look_up_client();
        }
        members
    }

    /// The kept client of Kafka's look-ups, made at the first.
    fn look_up_client(&self) -> Result<Arc<cluster::LookUpClient>, cluster::ClusterError> {
        self.look_up
            .get_or_make(|| cluster::look_up_client(&self.kafka, &self.group))
    }

    /// After a look-up that failed: the next one makes a new client.
    fn forget_look_up_client(&self) {
        self.look_up.forget();
    }
}

async fn overview(console: &Console) -> maud::Markup {
    let db = console.database().await;
    let consumer = console.consumer.as_str();
    let (offsets, group) = tokio::join!(console.kafka_offsets(), console.group_members());
    let (stored, breaker, rates, unfiltered, maintenance) = match &db {
        Ok(pool) => {
            tokio::join!(
                within(
                    "database",
                    positions::list(pool, consumer, Some(&console.topic))
                ),
                within("database", store::breaker(pool, consumer)),
                within("database", store::outcomes_by_minute(pool, consumer)),
                within("database", store::unfiltered_days(pool)),
                within(
                    "database",
                    store::maintenance_runs(pool, MAINTENANCE_RUNS_SHOWN)
                ),
            )
        }
        Err(why) => (
            Err(why.clone()),
            Err(why.clone()),
            Err(why.clone()),
            Err(why.clone()),
            Err(why.clone()),
        ),
    };
    let oldest_unread = match (&offsets, &stored) {
        (Ok(offsets), stored) => {
            let stored = stored.as_ref().map(Vec::as_slice).unwrap_or_default();
            // The partitions behind, each from the offset read next.
            let from: Vec<(i32, i64)> = offsets
                .iter()
                .map(|p| (p, pages::reads_from(p, stored)))
                .filter(|(p, from)| *from < p.end)
                .map(|(p, from)| (p.partition, from))
                .collect();
            within(
                "Kafka (the oldest unread records)",
                cluster::first_timestamps(
                    &console.kafka,
                    &console.group,
                    &console.topic,
                    from,
                    OLDEST_UNREAD_WITHIN,
                ),
            )
            .await
        }
        // The partition table says why already.
        (Err(_), _) => Ok(Vec::new()),
    };
    pages::overview(&pages::Overview {
        topic: &console.topic,
        group: &console.group,
        consumer,
        offsets,
        stored,
        members: group,
        breaker,
        rates,
        unfiltered,
        maintenance,
        oldest_unread,
        now: chrono::Utc::now(),
    })
}

/// The list's filter as the query string gives it.
fn filter_of(asked: &Asked) -> (ParkedFilter, Vec<String>) {
    let mut wrong = Vec::new();
    let mut filter = ParkedFilter::default();
    if let Some(reason) = asked.field("reason") {
        match ParkReason::from_code(reason) {
            Some(reason) => filter.reason = Some(reason),
            None => wrong.push(format!("reason {reason:?} is no reason code")),
        }
    }
    if let Some(day) = asked.field("day") {
        match NaiveDate::parse_from_str(day, "%Y-%m-%d") {
            Ok(day) => filter.day = Some(day),
            Err(_) => wrong.push(format!("day {day:?} is not YYYY-MM-DD")),
        }
    }
    if let Some(partition) = asked.field("partition") {
        match partition.parse() {
            Ok(partition) => filter.partition = Some(partition),
            Err(_) => wrong.push(format!("partition {partition:?} is not a number")),
        }
    }
    if let Some(after) = asked.field("after") {
        filter.after_id = after.parse().ok();
    }
    filter.order = asked.field("order").map(str::to_owned);
    filter.sku = asked.field("sku").map(str::to_owned);
    (filter, wrong)
}

async fn parked(console: &Console, asked: &Asked, standing: &Standing) -> maud::Markup {
    let (filter, wrong) = filter_of(asked);
    let (groups, list) = match console.database().await {
        Ok(pool) => tokio::join!(
            within(
                "database",
                store::parked_groups(pool, &console.consumer, GROUP_COUNTED_UP_TO)
            ),
            within(
                "database",
                store::list_parked(pool, &console.consumer, &filter, PAGE_RECORDS)
            ),
        ),
        Err(why) => (Err(why.clone()), Err(why)),
    };
    pages::parked(&pages::ParkedPage {
        standing,
        filter: &filter,
        wrong: &wrong,
        groups,
        list,
        page_records: PAGE_RECORDS,
    })
}

async fn record(console: &Console, id: i64, standing: &Standing) -> maud::Markup {
    let found = match console.database().await {
        Ok(pool) => {
            within(
                "database",
                store::parked_record(pool, &console.consumer, id),
            )
            .await
        }
        Err(why) => Err(why),
    };
    pages::record(id, found, standing)
}

/// What the search box holds: an event id, `partition:offset`, or else an
/// order id.
fn subject_of(query: &str) -> Subject {
    if let Ok(id) = query.parse::<Uuid>() {
        return Subject::Event(id);
    }
    match inspect::parse_record(query) {
        Ok((partition, offset)) => Subject::Record { partition, offset },
        Err(_) => Subject::Order(query.to_owned()),
    }
}

async fn search(console: &Console, asked: &Asked) -> maud::Markup {
    let Some(query) = asked.field("q") else {
        return pages::search("", None);
    };
    let subject = subject_of(query);
    let found = match console.database().await {
        Ok(pool) => within("inspect", inspected(console, pool.clone(), subject)).await,
        Err(why) => Err(why),
    };
    pages::search(query, Some(found))
}

/// [`inspect::inspect`], on a thread of its own: its future is not `Send`
/// (a lifetime the compiler cannot prove for every borrow it holds), and
/// a connection's task must be.
async fn inspected(
    console: &Console,
    pool: DbPool,
    subject: Subject,
) -> Result<inspect::Inspection, String> {
    let (consumer, kafka) = (console.consumer.clone(), console.kafka.clone());
    let (group, topic) = (console.group.clone(), console.topic.clone());
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let reader = TopicReader {
            settings: &kafka,
            group: &group,
            topic: &topic,
        };
        runtime
            .block_on(inspect::inspect(&pool, &consumer, &reader, &subject))
            .map_err(|error| error.to_string())
    })
    .await
    .map_err(|error| format!("inspect stopped: {error}"))?
}

async fn positions_page(console: &Console, standing: &Standing) -> maud::Markup {
    let offsets = console.kafka_offsets().await;
    let stored = match console.database().await {
        Ok(pool) => {
            within(
                "database",
                positions::list(pool, &console.consumer, Some(&console.topic)),
            )
            .await
        }
        Err(why) => Err(why),
    };
    pages::positions(&console.topic, offsets, stored, standing)
}

async fn breaker_page(console: &Console, standing: &Standing) -> maud::Markup {
    let state = match console.database().await {
        Ok(pool) => within("database", store::breaker(pool, &console.consumer)).await,
        Err(why) => Err(why),
    };
    pages::breaker(state, standing)
}

fn sign_in(console: &Console, asked: &Asked, standing: &Standing) -> Reply {
    let offered = asked.field("token").unwrap_or_default();
    match console.sessions.sign_in(offered) {
        Some(session) => {
            console.count("sign_in", "done");
            tracing::info!(peer = %asked.peer, "console: signed in");
            let mut reply = Reply::redirect("/");
            reply
                .headers
                .push((SET_COOKIE, session::set_cookie(&session)));
            reply
        }
        None => {
            console.count("sign_in", "refused");
            tracing::warn!(peer = %asked.peer, "console: a sign-in with a wrong token was refused");
            let why = match standing {
                Standing::ReadOnly => "This console is read-only: INBOX_CONSOLE_TOKEN is not set.",
                _ => "That is not the console's token.",
            };
            Reply::html(
                StatusCode::UNAUTHORIZED,
                pages::layout("Sign in", standing, pages::sign_in(standing, Some(why))),
            )
        }
    }
}

/// The console's actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Replay,
    PositionsSet,
    BreakerResume,
}

impl Action {
    /// The name logs and `inbox_console_actions_total` use.
    fn name(self) -> &'static str {
        match self {
            Action::Replay => "replay",
            Action::PositionsSet => "positions_set",
            Action::BreakerResume => "breaker_resume",
        }
    }

    /// The page's title: what is asked before it is confirmed, what was
    /// done after, why nothing was done when it could not be.
    fn title(self, stage: Stage) -> &'static str {
        match (self, stage) {
            (Action::Replay, Stage::Asked) => "Replay parked records?",
            (Action::Replay, Stage::Done) => "Parked records replayed",
            (Action::Replay, Stage::NotDone) => "Parked records not replayed",
            (Action::PositionsSet, Stage::Asked) => "Set positions?",
            (Action::PositionsSet, Stage::Done) => "Positions set",
            (Action::PositionsSet, Stage::NotDone) => "Positions not set",
            (Action::BreakerResume, Stage::Asked) => "Resume consumption?",
            (Action::BreakerResume, Stage::Done) => "Breaker resumed",
            (Action::BreakerResume, Stage::NotDone) => "Breaker not resumed",
        }
    }
}

/// Where an action stands when its page is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The confirmation: nothing done yet.
    Asked,
    Done,
    /// Refused, or it could not be done: nothing changed.
    NotDone,
}

impl Console {
    fn count(&self, action: &str, result: &str) {
        self.actions.with_label_values(&[action, result]).inc();
    }
}

/// An action: refused unless signed in with the session's CSRF token;
/// without `confirm=yes` the confirmation that says what it will touch;
/// with it, done, logged and counted, and its outcome shown.
async fn act(console: &Console, asked: &Asked, standing: &Standing, action: Action) -> Reply {
    let refused = match standing {
        Standing::ReadOnly => Some("This console is read-only: INBOX_CONSOLE_TOKEN is not set, so nothing can be changed from here (the CLI can)."),
        Standing::SignedOut => Some("Sign in with the console's token first."),
        Standing::SignedIn { .. } if !session::csrf_matches(standing, asked.field("csrf")) => {
            Some("The form's CSRF token is not this session's: nothing was done. Reload the page and try again.")
        }
        Standing::SignedIn { .. } => None,
    };
    if let Some(why) = refused {
        console.count(action.name(), "refused");
        tracing::warn!(action = action.name(), peer = %asked.peer, why, "console: an action was refused");
        return Reply::html(
            StatusCode::FORBIDDEN,
            pages::layout(action.title(Stage::NotDone), standing, pages::message(why)),
        );
    }
    let confirmed = asked.field("confirm") == Some("yes");
    let body = match action {
        Action::Replay => match replay(console, asked, standing, confirmed).await {
            Ok(Done::SeeOther(to)) => return Reply::redirect(to),
            Ok(Done::Page(markup)) => Ok(markup),
            Err(why) => Err(why),
        },
        Action::PositionsSet => positions_set(console, asked, standing, confirmed).await,
        Action::BreakerResume => breaker_resume(console, asked, standing, confirmed).await,
    };
    let (status, stage, markup) = match body {
        Ok(markup) if confirmed => (StatusCode::OK, Stage::Done, markup),
        Ok(markup) => (StatusCode::OK, Stage::Asked, markup),
        Err(why) => (StatusCode::CONFLICT, Stage::NotDone, pages::message(&why)),
    };
    Reply::html(status, pages::layout(action.title(stage), standing, markup))
}

/// The records a replay form names: ids, or a group (a reason, and a day
/// or every day).
async fn replay_ids(console: &Console, pool: &DbPool, asked: &Asked) -> Result<Vec<i64>, String> {
    let ids: Vec<i64> = asked
        .all("id")
        .iter()
        .map(|id| {
            id.parse()
                .map_err(|_| format!("{id:?} is no parked record id"))
        })
        .collect::<Result<_, _>>()?;
    if !ids.is_empty() {
        return Ok(ids);
    }
    let Some(reason) = asked.field("reason") else {
        return Err("Choose records to replay: tick some, or replay a group.".into());
    };
    let reason =
        ParkReason::from_code(reason).ok_or_else(|| format!("{reason:?} is no reason code"))?;
    let day = match asked.field("day") {
        Some(day) => Some(
            NaiveDate::parse_from_str(day, "%Y-%m-%d")
                .map_err(|_| format!("day {day:?} is not YYYY-MM-DD"))?,
        ),
        None => None,
    };
    within(
        "database",
        store::replay_candidates(pool, &console.consumer, reason, day),
    )
    .await
}

/// What an action answers when it was done.
enum Done {
    Page(maud::Markup),
    /// Where its outcome is shown (Post/Redirect/Get).
    SeeOther(&'static str),
}

/// Where a group replay running beside the requests shows its progress.
const GROUP_REPLAY_PAGE: &str = "/parked/replaying";

async fn replay(
    console: &Console,
    asked: &Asked,
    standing: &Standing,
    confirmed: bool,
) -> Result<Done, String> {
    let pool = console.database().await?;
    let ids = replay_ids(console, pool, asked).await?;
    if !confirmed {
        return Ok(Done::Page(pages::confirm_replay(
            asked,
            &ids,
            standing,
            group_replay::IN_REQUEST,
        )));
    }
    let by = format!("console, from {}", asked.peer.ip());
    if ids.len() > group_replay::IN_REQUEST {
        let records = ids.len();
        let group = pages::group_in_words(asked).unwrap_or_else(|| "the selected records".into());
        return match console.group_replays.start(
            pool.clone(),
            console.consumer.clone(),
            ids,
            group.clone(),
            by,
        ) {
            Ok(_) => {
                console.count(Action::Replay.name(), "done");
                tracing::info!(
                    action = "replay",
                    peer = %asked.peer,
                    group,
                    records,
                    "console: a group replay started beside the requests"
                );
                Ok(Done::SeeOther(GROUP_REPLAY_PAGE))
            }
            Err(running) => {
                console.count(Action::Replay.name(), "refused");
                let progress = running.progress();
                Err(format!(
                    "Another group replay runs ({} of {} records replayed): wait until it ends ({GROUP_REPLAY_PAGE}), then replay this group.",
                    progress.replayed, running.total
                ))
            }
        };
    }
    let mut outcomes = Vec::with_capacity(ids.len());
    for id in &ids {
        // Each replay is its own transaction, as the CLI's: a failure
        // stops the rest, and what was done is shown.
        match store::replay(pool, &console.consumer, *id, &by).await {
            Ok(outcome) => outcomes.push((*id, Ok(outcome))),
            Err(error) => {
                outcomes.push((*id, Err(error.to_string())));
                break;
            }
        }
    }
    let applied = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Ok(ReplayOutcome::Applied)))
        .count();
    console.count(Action::Replay.name(), "done");
    tracing::info!(
        action = "replay",
        peer = %asked.peer,
        records = ?ids,
        replayed = outcomes.len(),
        applied,
        "console: parked records replayed"
    );
    Ok(Done::Page(pages::replayed(&outcomes)))
}

/// The last group replay run beside the requests: its progress, refreshed
/// every few seconds while it runs.
fn replaying(console: &Console, standing: &Standing) -> Reply {
    let Some(job) = console.group_replays.last() else {
        return Reply::html(
            StatusCode::OK,
            pages::layout(
                "Group replay",
                standing,
                pages::message("No group replay ran since the console started."),
            ),
        );
    };
    let progress = job.progress();
    let (title, refresh) = match progress.finished_at {
        None => ("Group replay running", Some(2)),
        Some(_) => ("Group replay ended", None),
    };
    Reply::html(
        StatusCode::OK,
        pages::page(
            title,
            standing,
            pages::group_replay(&job, &progress),
            refresh,
        ),
    )
}

/// The offset a positions form asks for: `None` for the group's committed
/// offsets.
fn offset_target(text: &str) -> Result<Option<OffsetTarget>, String> {
    match text {
        "earliest" => Ok(Some(OffsetTarget::Earliest)),
        "latest" => Ok(Some(OffsetTarget::Latest)),
        "kafka" => Ok(None),
        number => number
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .map(|n| Some(OffsetTarget::At(n)))
            .ok_or_else(|| format!("offset {number:?}: a number >= 0, earliest, latest or kafka")),
    }
}

async fn positions_set(
    console: &Console,
    asked: &Asked,
    standing: &Standing,
    confirmed: bool,
) -> Result<maud::Markup, String> {
    let partitions: Vec<i32> = asked
        .all("partition")
        .iter()
        .map(|p| {
            p.parse()
                .map_err(|_| format!("partition {p:?} is not a number"))
        })
        .collect::<Result<_, _>>()?;
    // A number typed in (`at`) wins over the choice of the list.
    let target = offset_target(
        asked
            .field("at")
            .or_else(|| asked.field("offset"))
            .unwrap_or_default(),
    )?;
    let pool = console.database().await?;
    let offsets = console.kafka_offsets().await?;
    let stored = within(
        "database",
        positions::list(pool, &console.consumer, Some(&console.topic)),
    )
    .await?;
    let planned = operator::plan_moves(&console.topic, &offsets, &stored, &partitions, target)?;
    if !confirmed {
        return Ok(pages::confirm_positions(asked, &planned, standing));
    }
    let moved = within(
        "database",
        operator::apply_moves(pool, &console.consumer, &console.topic, &planned),
    )
    .await?;
    console.count(Action::PositionsSet.name(), "done");
    tracing::info!(
        action = "positions_set",
        peer = %asked.peer,
        topic = %console.topic,
        moves = ?moved.iter().map(|m| (m.partition, m.before, m.target)).collect::<Vec<_>>(),
        "console: positions set"
    );
    Ok(pages::positions_moved(&moved))
}

async fn breaker_resume(
    console: &Console,
    asked: &Asked,
    standing: &Standing,
    confirmed: bool,
) -> Result<maud::Markup, String> {
    let pool = console.database().await?;
    if !confirmed {
        let state = within("database", store::breaker(pool, &console.consumer)).await?;
        return Ok(pages::confirm_resume(state, standing));
    }
    let resumed = within("database", store::resume_breaker(pool, &console.consumer)).await?;
    console.count(Action::BreakerResume.name(), "done");
    tracing::info!(
        action = "breaker_resume",
        peer = %asked.peer,
        held = resumed.is_some(),
        "console: breaker resumed"
    );
    Ok(pages::resumed(resumed))
}

#[cfg(test)]
mod tests {

    /// The console's Kafka client is made once and kept across requests
    /// (a new one per request stalled the overview about a second at
    /// times); after a failed look-up the next makes a new one.
    #[test]
    fn the_look_up_client_is_made_once_and_kept_until_forgotten() {
        let kept: Kept<u32> = Kept::default();
        let made = std::cell::Cell::new(0);
        let make = || -> Result<u32, ()> {
            made.set(made.get() + 1);
            Ok(made.get())
        };
        let first = kept.get_or_make(make).unwrap();
        let again = kept.get_or_make(make).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(made.get(), 1);
        kept.forget();
        assert_eq!(*kept.get_or_make(make).unwrap(), 2);
        // A make that fails keeps nothing.
        kept.forget();
        assert!(kept.get_or_make(|| Err::<u32, ()>(())).is_err());
        assert_eq!(*kept.get_or_make(make).unwrap(), 3);
    }

    use super::*;

    #[test]
    fn the_search_box_tells_an_event_a_record_and_an_order_apart() {
        let id = Uuid::new_v4();
        assert_eq!(subject_of(&id.to_string()), Subject::Event(id));
        assert_eq!(
            subject_of("4:18233"),
            Subject::Record {
                partition: 4,
                offset: 18233
            }
        );
        assert_eq!(subject_of("ORD-1"), Subject::Order("ORD-1".into()));
    }

    #[test]
    fn every_action_page_has_a_human_title() {
        for action in [Action::Replay, Action::PositionsSet, Action::BreakerResume] {
            let titles: Vec<&str> = [Stage::Asked, Stage::Done, Stage::NotDone]
                .into_iter()
                .map(|stage| action.title(stage))
                .collect();
            for title in &titles {
                assert!(
                    !title.contains('_') && *title != action.name(),
                    "{title:?} is a raw action name"
                );
                assert!(title.starts_with(char::is_uppercase), "{title:?}");
            }
            assert!(
                titles[0].ends_with('?'),
                "a confirmation asks: {:?}",
                titles[0]
            );
            let mut distinct = titles.clone();
            distinct.dedup();
            assert_eq!(distinct.len(), 3, "{titles:?}");
        }
    }

    #[test]
    fn a_positions_form_names_an_offset_or_the_groups() {
        assert_eq!(offset_target("kafka"), Ok(None));
        assert_eq!(offset_target("earliest"), Ok(Some(OffsetTarget::Earliest)));
        assert_eq!(offset_target("12"), Ok(Some(OffsetTarget::At(12))));
        assert!(offset_target("-1").is_err());
        assert!(offset_target("").is_err());
    }
}
