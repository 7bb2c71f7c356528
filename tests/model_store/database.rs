//! The databases: a migrated template made once per run, a copy of it per
//! case, and the tables read back in the model's shape.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{Days, NaiveDate};
use inventory_inbox::store::{migrate, Retention};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use uuid::Uuid;

use super::{REFUSED_ORDER, RETENTION_DAYS};
use inbox_model::{self as model, Counts};

/// The server of `DATABASE_URL` (`.cargo/config.toml` sets the local one),
/// and the template every case's database is made from.
pub struct Server {
    pub admin: PgPool,
    pub options: PgConnectOptions,
    pub template: String,
    /// The database's today, when the template was made.
    pub today: NaiveDate,
    pub cases: AtomicUsize,
    /// The database of the last failing case, kept for a look (one at a
    /// time: shrinking fails many).
    pub kept: Mutex<Option<String>>,
    /// Outcomes over every case (the model's counts), printed at the end:
    /// what the generated cases exercised.
    pub tally: Mutex<BTreeMap<String, u64>>,
    /// Why the run's databases are gone, once they are.
    pub gone: Mutex<Option<String>>,
}

impl Server {
    pub async fn start() -> Server {
        let url = std::env::var("DATABASE_URL").expect("DATABASE_URL (set by .cargo/config.toml)");
        let options = PgConnectOptions::from_str(&url).expect("DATABASE_URL is a PostgreSQL URL");
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await
            .unwrap_or_else(|e| {
                panic!("PostgreSQL at {url}: {e} (run `scripts/services.sh up`; make test does)")
            });
        let template = format!("inbox_test_model_{}", Uuid::new_v4().simple());
        execute(&admin, &format!("CREATE DATABASE {template}")).await;
        let pool = connect(&options, &template).await;
        let retention = Retention {
            ledger_days: RETENTION_DAYS as i32,
            parked_days: 30,
            parked_payload_days: 0,
            reservation_days: 30,
            detach_reservations: false,
        };
        migrate(&pool.clone().into(), retention)
            .await
            .expect("migrate the template");
        execute(
            &pool,
            &format!(
                "ALTER TABLE order_reservation ADD CONSTRAINT model_refused_order
                 CHECK (order_id <> '{REFUSED_ORDER}')"
            ),
        )
        .await;
        let today: NaiveDate = sqlx::query_scalar("SELECT current_date")
            .fetch_one(&pool)
            .await
            .expect("today");
        let window: Vec<NaiveDate> =
            sqlx::query_scalar("SELECT d FROM inbox_window_days() AS d ORDER BY d")
                .fetch_all(&pool)
                .await
                .expect("the window");
        let first = today - Days::new(RETENTION_DAYS);
        let expected: Vec<NaiveDate> = first
            .iter_days()
            .take_while(|d| *d <= today + Days::new(model::DAYS_AHEAD))
            .collect();
        assert_eq!(window, expected, "the template's window is the model's");
        pool.close().await;
        Server {
            admin,
            options,
            template,
            today,
            cases: AtomicUsize::new(0),
            kept: Mutex::new(None),
            tally: Mutex::new(BTreeMap::new()),
            gone: Mutex::new(None),
        }
    }

    /// A fresh database for one case, as migrated, with this stock.
    /// `Err`: the template is gone (see [`Server::lost`]).
    pub async fn database(
        &self,
        on_hand: &BTreeMap<String, i64>,
    ) -> Result<(String, PgPool), String> {
        let n = self.cases.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}_{n}", self.template);
        sqlx::query(&format!(
            "CREATE DATABASE {name} TEMPLATE {}",
            self.template
        ))
        .execute(&self.admin)
        .await
        .map_err(|e| format!("CREATE DATABASE {name}: {e}"))?;
        let pool = connect(&self.options, &name).await;
        for (sku, on_hand) in on_hand {
            sqlx::query("INSERT INTO inventory_stock (sku, on_hand, reserved) VALUES ($1, $2, 0)")
                .bind(sku)
                .bind(on_hand)
                .execute(&pool)
                .await
                .expect("seed the stock");
        }
        Ok((name, pool))
    }

    /// Whether the template is still there: `scripts/services.sh prune`
    /// (`make test` runs it first) drops the databases of runs, this one's
    /// too if it runs meanwhile.
    pub async fn template_exists(&self) -> bool {
        sqlx::query_scalar("SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)")
            .bind(&self.template)
            .fetch_one(&self.admin)
            .await
            .unwrap_or(false)
    }

    /// The run's databases went away under it: the cases from now on are
    /// not run, and the test fails saying so (a failure of the store it is
    /// not, nor a case to keep for regression).
    pub fn lost(&self, why: String) {
        self.gone.lock().expect("gone lock").get_or_insert(why);
    }

    pub fn gone(&self) -> Option<String> {
        self.gone.lock().expect("gone lock").clone()
    }

    /// Drops a database of this run. A session of another role that looked
    /// in (a monitoring query) cannot be ended by this role: it is waited
    /// for a little, then the database is left to `scripts/services.sh
    /// prune`.
    pub async fn drop_database(&self, name: &str) {
        let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
        let mut refused = None;
        for _ in 0..20 {
            match sqlx::query(&drop).execute(&self.admin).await {
                Ok(_) => return,
                Err(error) => refused = Some(error),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        eprintln!("could not drop database {name} ({refused:?}); scripts/services.sh prune will");
    }

    /// Keeps the database of a failing case (dropping the one kept before).
    pub async fn keep(&self, name: String) {
        let before = self.kept.lock().expect("kept lock").replace(name);
        if let Some(before) = before {
            self.drop_database(&before).await;
        }
    }

    /// Adds one to `what` in the tally.
    pub fn note(&self, what: &str) {
        *self
            .tally
            .lock()
            .expect("tally lock")
            .entry(what.to_owned())
            .or_default() += 1;
    }

    /// Adds a batch's outcome to the tally.
    pub fn count(&self, records: usize, counts: &Counts) {
        let mut tally = self.tally.lock().expect("tally lock");
        let mut add = |what: &str, n: u64| *tally.entry(what.to_owned()).or_default() += n;
        add("batches", 1);
        add("records", records as u64);
        add("processed", counts.processed);
        add("business duplicates", counts.business_duplicates);
        add("duplicates", counts.duplicates);
        add("lines reserved", counts.lines_reserved);
        add("lines rejected", counts.lines_rejected);
        for (_, _, reason) in &counts.newly_parked {
            add(&format!("parked {reason}"), 1);
        }
    }

    pub async fn stop(self) {
        self.drop_database(&self.template).await;
        if let Some(kept) = self.kept.lock().expect("kept lock").take() {
            eprintln!("kept database {kept} of the minimal failing case");
        }
        self.admin.close().await;
    }
}

pub async fn connect(options: &PgConnectOptions, database: &str) -> PgPool {
    // Each consumer's inbox keeps a connection for each of up to three
    // lanes; one holds the stock rows, one watches, one reads the tables.
    PgPoolOptions::new()
        .max_connections(12)
        .connect_with(options.clone().database(database))
        .await
        .unwrap_or_else(|e| panic!("connect to {database}: {e}"))
}

pub async fn execute(pool: &PgPool, sql: &str) {
    sqlx::query(sql)
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}
