//! A database of each test's own on the shared PostgreSQL: created and
//! migrated by the service's own `migrate`, dropped when the test passes,
//! with the queries the tests read it through.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Row};

use super::{binary, require_services, unique, wait_until, ADMIN_URL};

/// A test's database and its snapshots are dropped when the test passes, so
/// runs do not pile databases up in the shared cluster (each costs autovacuum
/// and catalog work that slows every later measurement). A failed test keeps
/// them for inspection and says so.
impl Drop for TestDb {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept database {} of the failed test", self.name);
            return;
        }
        let name = self.name.clone();
        // Drop runs inside the test's runtime, which cannot be blocked on:
        // the drop gets a thread and a runtime of its own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for dropping the test database");
            runtime.block_on(drop_databases(&name))
        })
        .join();
        if let Ok(Err(error)) = dropped {
            eprintln!("could not drop database {}: {error}", self.name);
        }
    }
}

/// Drops the database `name` and every database named `name_…` (snapshots).
async fn drop_databases(name: &str) -> Result<(), sqlx::Error> {
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect(ADMIN_URL)
        .await?;
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT datname FROM pg_database WHERE datname = $1 OR starts_with(datname, $1 || '_')",
    )
    .bind(name)
    .fetch_all(&admin)
    .await?;
    for database in names {
        sqlx::query(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
            .execute(&admin)
            .await?;
    }
    admin.close().await;
    Ok(())
}

/// The login role the consumer runs as in tests: a member of the
/// least-privilege role `inventory_app` that the migrations grant.
pub const APP_ROLE: &str = "inventory_app_test";

/// A fresh database with the service's migrations applied.
pub struct TestDb {
    pub name: String,
    /// As the owner role (migrations, operator commands, test queries).
    pub url: String,
    /// As the least-privilege application role (`run`).
    pub app_url: String,
    pub pool: PgPool,
}

impl TestDb {
    pub async fn new() -> TestDb {
        require_services();
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(ADMIN_URL)
            .await
            .expect("connect to PostgreSQL as the owner role");
        let name = unique("inbox_test");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&admin)
            .await
            .expect("create test database");
        admin.close().await;
        let url = format!("postgres://inventory:inventory@127.0.0.1:5432/{name}");
        let status = Command::new(binary())
            .args(["migrate"])
            .env("DATABASE_URL", &url)
            .status()
            .expect("run inventory-inbox migrate");
        assert!(status.success(), "migrate failed");
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect(&url)
            .await
            .expect("connect to the test database");
        // Roles are cluster-wide: create the test login role once; tests
        // running at the same moment may race to do it.
        let create = format!(
            "DO $$ BEGIN
               IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
                 CREATE ROLE {APP_ROLE} LOGIN PASSWORD '{APP_ROLE}' IN ROLE inventory_app;
               END IF;
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
             END $$"
        );
        sqlx::query(&create)
            .execute(&pool)
            .await
            .expect("app login role");
        let app_url = format!("postgres://{APP_ROLE}:{APP_ROLE}@127.0.0.1:5432/{name}");
        TestDb {
            name,
            url,
            app_url,
            pool,
        }
    }

    /// A copy of the whole database as it is now (a backup), by name. No
    /// consumer may be connected; the test's own connections are closed.
    pub async fn snapshot(&self) -> String {
        let copy = format!("{}_backup_{}", self.name, unique("b"));
        // A consumer of the owner role may connect again in between: retry.
        for attempt in 1.. {
            let copied = self
                .try_admin(&[
                    format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}' AND pid <> pg_backend_pid()", self.name),
                    format!("CREATE DATABASE {copy} TEMPLATE {}", self.name),
                ])
                .await;
            match copied {
                Ok(()) => break,
                Err(error) if attempt < 20 => {
                    eprintln!("snapshot: {error}; again");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(error) => panic!("snapshot of {}: {error}", self.name),
            }
        }
        copy
    }

    /// Puts a snapshot back in place of the database (a restore): what was
    /// committed since is gone. No consumer may be connected.
    pub async fn restore(&self, snapshot: &str) {
        // DROP ... WITH (FORCE) ends the consumers' sessions, but not an
        // autovacuum worker's: PostgreSQL refuses the owner role that
        // ("must be a member of the role whose process is being
        // terminated"). So it waits until no worker is on the database, and
        // tries again should one have started in between.
        let drop = format!("DROP DATABASE {} WITH (FORCE)", self.name);
        for attempt in 1.. {
            self.without_autovacuum().await;
            match self.try_admin(std::slice::from_ref(&drop)).await {
                Ok(()) => break,
                Err(error) if error.contains("pg_signal_backend") && attempt < 20 => {}
                Err(error) => panic!("{error}"),
            }
        }
        self.admin(&[format!("CREATE DATABASE {} TEMPLATE {snapshot}", self.name)])
            .await;
    }

    /// Waits until no autovacuum worker works on the database.
    async fn without_autovacuum(&self) {
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(ADMIN_URL)
            .await
            .expect("connect to PostgreSQL as the owner role");
        wait_until(
            Duration::from_secs(60),
            "no autovacuum worker on the database",
            || async {
                let workers: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = $1 AND backend_type = 'autovacuum worker'",
                )
                .bind(&self.name)
                .fetch_one(&admin)
                .await
                .expect("pg_stat_activity");
                workers == 0
            },
        )
        .await;
        admin.close().await;
    }

    async fn try_admin(&self, statements: &[String]) -> Result<(), String> {
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(ADMIN_URL)
            .await
            .expect("connect to PostgreSQL as the owner role");
        for statement in statements {
            if let Err(error) = sqlx::query(statement).execute(&admin).await {
                admin.close().await;
                return Err(format!("{statement}: {error}"));
            }
        }
        admin.close().await;
        Ok(())
    }

    async fn admin(&self, statements: &[String]) {
        if let Err(error) = self.try_admin(statements).await {
            panic!("{error}");
        }
    }

    /// The application role's URL through a proxy on `port` (in front of
    /// the local PostgreSQL).
    pub fn app_url_via(&self, port: u16) -> String {
        self.app_url
            .replace("127.0.0.1:5432", &format!("127.0.0.1:{port}"))
    }

    /// Sets the database's ledger retention, as `inventory-inbox migrate`
    /// does for the owner; maintenance keeps that many days from then on.
    pub async fn set_retention_days(&self, days: i32) {
        sqlx::query("UPDATE inbox_settings SET retention_days = $1, reservation_retention_days = greatest(reservation_retention_days, $1)")
            .bind(days)
            .execute(&self.pool)
            .await
            .expect("set the retention");
    }

    /// Sets the stock of SKUs (on_hand, nothing reserved).
    pub async fn seed_stock(&self, stock: &[(&str, i64)]) {
        for (sku, on_hand) in stock {
            sqlx::query(
                "INSERT INTO inventory_stock (sku, on_hand) VALUES ($1, $2)
                 ON CONFLICT (sku) DO UPDATE SET on_hand = EXCLUDED.on_hand, reserved = 0",
            )
            .bind(sku)
            .bind(on_hand)
            .execute(&self.pool)
            .await
            .expect("seed stock");
        }
    }

    /// Another session holding a stock row (`FOR UPDATE`) until the returned
    /// transaction is rolled back: a batch that needs the row waits for it,
    /// and gives up after the consumer's lock timeout.
    pub async fn hold_stock_row(&self, sku: &str) -> sqlx::Transaction<'static, sqlx::Postgres> {
        let mut holder = self.pool.begin().await.expect("begin");
        sqlx::query("SELECT * FROM inventory_stock WHERE sku = $1 FOR UPDATE")
            .bind(sku)
            .execute(&mut *holder)
            .await
            .expect("lock the row");
        holder
    }

    pub async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&self.pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    pub async fn ledger_rows(&self) -> i64 {
        self.count("SELECT count(*) FROM processed_inbox").await
    }

    /// sku -> (on_hand, reserved)
    pub async fn stock(&self) -> BTreeMap<String, (i64, i64)> {
        sqlx::query("SELECT sku, on_hand, reserved FROM inventory_stock ORDER BY sku")
            .fetch_all(&self.pool)
            .await
            .expect("read stock")
            .into_iter()
            .map(|r| (r.get("sku"), (r.get("on_hand"), r.get("reserved"))))
            .collect()
    }

    pub async fn reserved(&self, sku: &str) -> i64 {
        self.stock().await.get(sku).map(|s| s.1).unwrap_or(-1)
    }

    /// (order_id, sku) -> (quantity, status)
    pub async fn reservations(&self) -> BTreeMap<(String, String), (i32, String)> {
        sqlx::query("SELECT order_id, sku, quantity::integer AS quantity, status::text AS status FROM order_reservation")
            .fetch_all(&self.pool)
            .await
            .expect("read reservations")
            .into_iter()
            .map(|r| {
                (
                    (r.get("order_id"), r.get("sku")),
                    (r.get("quantity"), r.get("status")),
                )
            })
            .collect()
    }

    /// (reason, offset) of every parked row, by offset.
    pub async fn parked(&self) -> Vec<(String, i64)> {
        sqlx::query(
            "SELECT reason, kafka_offset FROM inbox_parked ORDER BY kafka_partition, kafka_offset",
        )
        .fetch_all(&self.pool)
        .await
        .expect("read parked")
        .into_iter()
        .map(|r| (r.get("reason"), r.get("kafka_offset")))
        .collect()
    }
}

/// Waits until the ledger holds `rows` rows, then watches it for a second:
/// no more may appear.
pub async fn wait_for_ledger(db: &TestDb, rows: i64, timeout: Duration) {
    wait_until(timeout, &format!("{rows} ledger rows"), || async {
        db.ledger_rows().await >= rows
    })
    .await;
    for _ in 0..10 {
        assert_eq!(
            db.ledger_rows().await,
            rows,
            "more ledger rows than expected"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
