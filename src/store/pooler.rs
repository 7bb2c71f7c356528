//! How statements reach PostgreSQL: directly, or through a connection
//! pooler such as PgBouncer (`INBOX_DB_POOLER`; docs/deploy.md "Behind a connection
//! pooler"). Every statement of the service goes through a [`DbPool`], which
//! sends it as the way to the server requires:
//!
//! - `none`: the session's limits (timeouts, generic plans) travel in the
//!   start-up packet and statements are prepared once per connection: a
//!   batch is one round trip.
//! - `session`: the pooler gives a client one server connection for its
//!   whole session, but refuses start-up `options`: the limits are `SET`
//!   once per new connection (the pooler's reset, `DISCARD ALL`, takes them
//!   back when the client leaves); statements are prepared as directly.
//! - `transaction`: the pooler hands the server connection to another
//!   client after each transaction, so nothing may outlive one. Each
//!   statement runs in an explicit transaction whose `BEGIN` carries the
//!   limits as `SET LOCAL` (one simple query, one round trip), as an unnamed
//!   statement: a named one would collide with, or miss, another client's
//!   on whichever server connection it lands on. Outside a transaction a
//!   bound statement is two exchanges (Parse/Describe/Sync, then
//!   Bind/Execute/Sync), and the pooler may send the second to another
//!   server connection, whose unnamed statement is someone else's.
//!
//! Which one it is, the service cannot tell from its side (a pooler answers
//! like PostgreSQL, and its pool mode is not visible to its clients), and
//! guessing `session` where the pooler pools transactions would break
//! exactly-once: so the operator says it.

use std::borrow::Cow;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use sqlx::error::BoxDynError;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{
    PgArguments, PgConnectOptions, PgQueryResult, PgRow, PgStatement, PgTypeInfo,
};
use sqlx::Describe;
use sqlx::{
    ConnectOptions as _, Connection as _, Either, Execute, Executor, PgConnection, PgPool,
    Postgres, Transaction,
};

/// What stands between the service and PostgreSQL (`INBOX_DB_POOLER`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Pooler {
    /// PostgreSQL itself (or a pooler that passes start-up options and
    /// keeps prepared statements per client, which is the same to us).
    #[default]
    None,
    /// A pooler in session mode (PgBouncer `pool_mode = session`).
    Session,
    /// A pooler in transaction mode (PgBouncer `pool_mode = transaction`).
    Transaction,
}

/// The limits of every session: `statement_timeout`, `lock_timeout` (zero:
/// none) and generic plans (every statement is set-based over arrays, so a
/// plan does not depend on the values, while a custom plan would re-plan
/// the partitioned ledger, every partition, on each execution).
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub statement_timeout: Duration,
    pub lock_timeout: Duration,
}

impl Limits {
    /// As start-up options (`none`).
    pub fn options(&self) -> [(&'static str, String); 3] {
        [
            ("plan_cache_mode", "force_generic_plan".into()),
            (
                "statement_timeout",
                self.statement_timeout.as_millis().to_string(),
            ),
            ("lock_timeout", self.lock_timeout.as_millis().to_string()),
        ]
    }

    /// As one statement of `SET`s (`session`) or `SET LOCAL`s
    /// (`transaction`), separated by semicolons.
    fn set(&self, scope: &str) -> String {
        self.options()
            .iter()
            .map(|(name, value)| format!("SET {scope}{name} = {value}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// How long a connection may take to be made (the pool's acquire timeout,
/// and [`DbPool::why_no_connection`]'s attempt).
const CONNECT_ATTEMPT: Duration = Duration::from_secs(2);

/// How long a statement waits for the database's answer, unless told
/// otherwise ([`DbPool::answer_within`]).
const DEFAULT_ANSWER_WITHIN: Duration = Duration::from_secs(35);

/// The pool of connections to the inventory database, and how statements
/// travel to it (see the module). Run statements on `&DbPool` as on a
/// `&PgPool`; take connections and transactions from it, never around it.
#[derive(Debug, Clone)]
pub struct DbPool {
    pool: PgPool,
    pooler: Pooler,
    /// What begins a transaction: `BEGIN`, and in transaction pooling the
    /// limits as `SET LOCAL`, in the same simple query.
    begin: Cow<'static, str>,
    /// The limits as session `SET`s, for a connection of its own in session
    /// pooling (none otherwise: the start-up packet carries them directly,
    /// and `begin` in transaction pooling).
    session_set: Option<String>,
    /// The longest [`DbPool::with_answer_deadline`] waits for the database's answer: a
    /// database that stops answering (packets swallowed, no reset) would
    /// otherwise hold a batch, and a shutdown, for as long as the kernel
    /// keeps the connection.
    answer_within: Duration,
}

impl DbPool {
    pub(super) fn new(
        options: PgConnectOptions,
        pooler: Pooler,
        limits: Limits,
        size: u32,
    ) -> Self {
        let session_set = (pooler == Pooler::Session).then(|| limits.set(""));
        let begin = match pooler {
            Pooler::Transaction => format!("BEGIN; {}", limits.set("LOCAL ")).into(),
            _ => "BEGIN".into(),
        };
        let set = session_set.clone();
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(size)
            .min_connections(0)
            .acquire_timeout(CONNECT_ATTEMPT)
            // No ping before each use: it would cost a round trip per batch. A
            // dead connection fails the batch, which is retried on a new one.
            .test_before_acquire(false)
            .after_connect(move |connection, _| {
                let set = set.clone();
                Box::pin(async move {
                    if let Some(set) = set {
                        connection.execute(set.as_str()).await?;
                    }
                    Ok(())
                })
            })
            .connect_lazy_with(options);
        DbPool {
            pool,
            pooler,
            begin,
            session_set,
            answer_within: DEFAULT_ANSWER_WITHIN,
        }
    }

    /// The longest a statement run through [`DbPool::with_answer_deadline`] waits for
    /// the database's answer before it is given up as a transient failure
    /// (`database_timeout`): somewhat more than the server's own
    /// `statement_timeout`, which ends a statement that runs too long,
    /// while this ends one whose answer never comes.
    pub fn answer_within(mut self, deadline: Duration) -> Self {
        self.answer_within = deadline;
        self
    }

    /// `work` against the database, given up after
    /// [`DbPool::answer_within`].
    pub async fn with_answer_deadline<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, super::StoreError>>,
    ) -> Result<T, super::StoreError> {
        match tokio::time::timeout(self.answer_within, work).await {
            Ok(result) => result,
            Err(_) => Err(super::StoreError::Transient {
                reason: super::RetryReason::DatabaseTimeout,
                message: format!(
                    "no answer from the database within {:?}",
                    self.answer_within
                ),
            }),
        }
    }

    pub fn pooler(&self) -> Pooler {
        self.pooler
    }

    /// A connection now, kept in the pool for what follows, or why none
    /// comes.
    pub async fn reachable(&self) -> Result<(), super::StoreError> {
        match self.pool.acquire().await {
            Ok(_) => Ok(()),
            Err(sqlx::Error::PoolTimedOut) => Err(self
                .why_no_connection()
                .await
                .unwrap_or_else(|| sqlx::Error::PoolTimedOut.into())),
            Err(error) => Err(error.into()),
        }
    }

    /// Why the pool gives no connection, which sqlx does not say (it tries
    /// a refused connection again until its acquire timeout, then says
    /// "pool timed out"): one attempt of its own, its failure told with
    /// DATABASE_URL's host and port, never its password. `None` when the
    /// attempt connects: the pool was only busy.
    pub async fn why_no_connection(&self) -> Option<super::StoreError> {
        let options = self.pool.connect_options();
        let address = match options.get_socket() {
            Some(socket) => socket.display().to_string(),
            None => format!("{}:{}", options.get_host(), options.get_port()),
        };
        let cannot = |why: String| super::StoreError::Transient {
            reason: super::RetryReason::Connection,
            message: format!("cannot connect to DATABASE_URL's {address}: {why}"),
        };
        let attempt = PgConnection::connect_with(&options);
        match tokio::time::timeout(CONNECT_ATTEMPT, attempt).await {
            Ok(Ok(connection)) => {
                let _ = connection.close().await;
                None
            }
            Ok(Err(sqlx::Error::Io(error))) => Some(cannot(match error.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
                _ => error.to_string(),
            })),
            Ok(Err(sqlx::Error::Tls(error))) => Some(cannot(format!("TLS: {error}"))),
            Ok(Err(error)) => Some(error.into()),
            Err(_) => Some(cannot(format!(
                "no answer within {} s",
                CONNECT_ATTEMPT.as_secs()
            ))),
        }
    }

    /// Whether statements are prepared (named, once per connection): not
    /// in transaction pooling. Statements run in a transaction taken from
    /// [`DbPool::begin`] say `.persistent(pool.prepares())`.
    pub fn prepares(&self) -> bool {
        self.pooler != Pooler::Transaction
    }

    /// A connection of the pool. In transaction pooling only for
    /// [`DbPool::begin_on`] and simple-protocol statements (`raw_sql`).
    pub async fn acquire(&self) -> Result<PoolConnection<Postgres>, sqlx::Error> {
        self.pool.acquire().await
    }

    /// A transaction on a connection of the pool, with the session's limits.
    pub async fn begin(&self) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        self.pool.begin_with(self.begin.clone()).await
    }

    /// A transaction on `connection` (of this pool), with the session's
    /// limits.
    pub async fn begin_on<'c>(
        &self,
        connection: &'c mut PgConnection,
    ) -> Result<Transaction<'c, Postgres>, sqlx::Error> {
        connection.begin_with(self.begin.clone()).await
    }

    /// What begins a transaction on a connection of its own (see
    /// [`DbPool::connect_own`]) before `more` statements, in one simple query:
    /// `BEGIN` with `extra` (say, `ISOLATION LEVEL ...`), the limits in
    /// transaction pooling, then `more`.
    pub fn begin_statement(&self, extra: &str, more: &str) -> String {
        let mut begin = self.begin.to_string();
        if !extra.is_empty() {
            begin = begin.replacen("BEGIN", &format!("BEGIN {extra}"), 1);
        }
        if !more.is_empty() {
            begin.push_str("; ");
            begin.push_str(more);
        }
        begin
    }

    /// A connection of its own, outside the pool, for work that takes long
    /// by design (no slow-statement warnings), with the session's limits.
    pub async fn connect_own(&self) -> Result<PgConnection, sqlx::Error> {
        let options = (*self.pool.connect_options())
            .clone()
            .log_slow_statements(log::LevelFilter::Off, Duration::ZERO);
        let mut connection = PgConnection::connect_with(&options).await?;
        if let Some(set) = &self.session_set {
            connection.execute(set.as_str()).await?;
        }
        Ok(connection)
    }

    /// The pool itself, for what goes around [`DbPool`]'s rules knowingly
    /// (the migrator, which takes a session lock and needs no pooler).
    pub(super) fn pg(&self) -> &PgPool {
        &self.pool
    }

    pub async fn close(&self) {
        self.pool.close().await
    }
}

/// A pool connected directly (no pooler) by someone else, `#[sqlx::test]`
/// say: its sessions' limits are what it was given.
impl From<PgPool> for DbPool {
    fn from(pool: PgPool) -> Self {
        DbPool {
            pool,
            pooler: Pooler::None,
            begin: "BEGIN".into(),
            session_set: None,
            answer_within: DEFAULT_ANSWER_WITHIN,
        }
    }
}

/// A statement sent unnamed (never prepared on the server).
struct Unprepared<E>(E);

impl<'q, E: Execute<'q, Postgres>> Execute<'q, Postgres> for Unprepared<E> {
    fn sql(&self) -> &'q str {
        self.0.sql()
    }

    fn statement(&self) -> Option<&PgStatement<'q>> {
        self.0.statement()
    }

    fn take_arguments(&mut self) -> Result<Option<PgArguments>, BoxDynError> {
        self.0.take_arguments()
    }

    fn persistent(&self) -> bool {
        false
    }
}

impl<'p> Executor<'p> for &'_ DbPool {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<PgQueryResult, PgRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Postgres>,
    {
        if self.prepares() {
            return (&self.pool).fetch_many(query);
        }
        let pool = self.clone();
        stream::once(async move {
            let mut transaction = pool.begin().await?;
            let steps: Vec<_> = transaction
                .fetch_many(Unprepared(query))
                .try_collect()
                .await?;
            transaction.commit().await?;
            Ok::<_, sqlx::Error>(stream::iter(steps.into_iter().map(Ok)))
        })
        .try_flatten()
        .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Postgres>,
    {
        if self.prepares() {
            return (&self.pool).fetch_optional(query);
        }
        let pool = self.clone();
        Box::pin(async move {
            let mut transaction = pool.begin().await?;
            let row = transaction.fetch_optional(Unprepared(query)).await?;
            transaction.commit().await?;
            Ok(row)
        })
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement<'q>, sqlx::Error>> {
        (&self.pool).prepare_with(sql, parameters)
    }

    fn describe<'e, 'q: 'e>(
        self,
        sql: &'q str,
    ) -> BoxFuture<'e, Result<Describe<Postgres>, sqlx::Error>> {
        (&self.pool).describe(sql)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            statement_timeout: Duration::from_secs(30),
            lock_timeout: Duration::from_millis(1500),
        }
    }

    #[test]
    fn transaction_pooling_begins_with_the_limits_in_one_statement() {
        let options = PgConnectOptions::new();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _entered = runtime.enter();
        let pool = DbPool::new(options.clone(), Pooler::Transaction, limits(), 1);
        assert_eq!(
            pool.begin,
            "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL statement_timeout = 30000; SET LOCAL lock_timeout = 1500"
        );
        assert!(!pool.prepares());
        assert_eq!(
            pool.begin_statement("READ ONLY", "SET LOCAL statement_timeout = 0"),
            "BEGIN READ ONLY; SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL statement_timeout = 30000; SET LOCAL lock_timeout = 1500; SET LOCAL statement_timeout = 0"
        );
        let session = DbPool::new(options.clone(), Pooler::Session, limits(), 1);
        assert_eq!(session.begin, "BEGIN");
        assert!(session.prepares());
        assert_eq!(
            session.session_set.as_deref(),
            Some("SET plan_cache_mode = force_generic_plan; SET statement_timeout = 30000; SET lock_timeout = 1500")
        );
        let direct = DbPool::new(options, Pooler::None, limits(), 1);
        assert_eq!(direct.begin_statement("READ ONLY", ""), "BEGIN READ ONLY");
        assert!(direct.session_set.is_none());
    }
}
