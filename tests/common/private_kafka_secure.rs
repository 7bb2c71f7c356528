//! A private Kafka whose listeners ask what managed Kafka asks, beside its
//! PLAINTEXT one (for the test's own topics and records):
//!
//! - `SCRAM`: SASL_SSL with SCRAM-SHA-512, the user created when the
//!   storage is formatted (`--add-scram`);
//! - `MTLS`: SSL with a client certificate required (mutual TLS);
//! - `OAUTH`: SASL_SSL with OAUTHBEARER, the tokens checked against the
//!   JWKS of an identity provider the test serves on loopback, with a token
//!   endpoint (client credentials) and tokens of [`TOKEN_LIFETIME`]; a
//!   connection whose token expired must authenticate again (KIP-368).
//!
//! The CA and every certificate are made here with the openssl CLI, the
//! tokens signed with it too: nothing is fetched. One broker serves every
//! test of a binary ([`SecureKafka::shared`]): it starts with the first, on a
//! thread that lives as long as the binary (the JVM dies with it, even when
//! the binary is killed), and its files are removed at exit. Anything that
//! keeps it from starting FAILS the test.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use inbox_services::kafka::base64_url;

use super::private_kafka::{PrivateKafka, Setup};
use super::test_ca::{issue, make_ca, openssl};
use super::{free_port, unique};

/// The SCRAM user the storage is formatted with, and its password.
pub const SCRAM_USER: &str = "inventory-inbox";
pub const SCRAM_PASSWORD: &str = "Scram-S3cret-7d1e";
/// The client of the token endpoint that gets tokens, and its secret.
pub const CLIENT_ID: &str = "inventory-inbox";
pub const CLIENT_SECRET: &str = "Oidc-S3cret-c4a9";
/// A client the token endpoint answers with tokens that expired already.
pub const EXPIRED_CLIENT_ID: &str = "inventory-inbox-expired";
/// A client the token endpoint answers with tokens for another audience,
/// which the brokers refuse.
pub const OTHER_AUDIENCE_CLIENT_ID: &str = "inventory-inbox-elsewhere";
/// How long a token of the token endpoint is valid: librdkafka fetches the
/// next at 80 % of it, so a test of a few of these sees refreshes.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(10);
/// The audience and issuer the brokers expect of a token.
const AUDIENCE: &str = "inventory-kafka";
const ISSUER: &str = "inventory-inbox-test-idp";

/// The broker, its listeners and what a client needs for each.
pub struct SecureKafka {
    /// The PLAINTEXT listener: topics, records and offsets of the tests.
    pub plaintext: String,
    pub scram: String,
    pub mtls: String,
    pub oauth: String,
    /// `ca.crt` (signed the broker's certificate, for 127.0.0.1 and
    /// localhost), `other-ca.crt` (signed nothing of the broker's),
    /// `client.crt`/`client.key` (signed by the CA), `stranger.crt`/
    /// `stranger.key` (signed by the other CA).
    pub tls: PathBuf,
    pub idp: Arc<IdentityProvider>,
}

/// The running broker and the directory of its certificates: stopped and
/// removed at exit.
static RUNNING: Mutex<Option<(PrivateKafka, PathBuf)>> = Mutex::new(None);

extern "C" fn stop_at_exit() {
    if let Ok(mut running) = RUNNING.lock() {
        if let Some((kafka, dir)) = running.take() {
            drop(kafka);
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl SecureKafka {
    /// The broker of this test binary, started by the first caller.
    pub fn shared() -> &'static SecureKafka {
        static SHARED: OnceLock<SecureKafka> = OnceLock::new();
        SHARED.get_or_init(|| {
            let (started, start) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name("secure-kafka".into())
                .spawn(move || {
                    let result = std::panic::catch_unwind(SecureKafka::start);
                    let running = result.is_ok();
                    let _ = started.send(result.map_err(|panic| {
                        panic
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default()
                    }));
                    // The JVM dies with this thread: it lives as long as
                    // the binary.
                    if running {
                        loop {
                            std::thread::park();
                        }
                    }
                })
                .expect("start the broker's thread");
            // SAFETY: registers a plain function, run once at exit.
            unsafe { libc::atexit(stop_at_exit) };
            match start.recv().expect("the broker's thread answers") {
                Ok(kafka) => kafka,
                Err(panic) => panic!("the secure private Kafka did not start: {panic}"),
            }
        })
    }

    fn start() -> SecureKafka {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique("inbox-kafka-tls"));
        let tls = dir.join("tls");
        std::fs::create_dir_all(&tls).expect("the TLS directory");
        make_certificates(&tls);
        let idp = IdentityProvider::start(&tls);
        let [scram, mtls, oauth] = [free_port(), free_port(), free_port()];
        let file = |name: &str| tls.join(name).display().to_string();
        let jwks = idp.url("/jwks");
        let settings = [
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", &file("broker.pem")),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.location", &file("ca.crt")),
            ("listener.name.mtls.ssl.client.auth", "required"),
            (
                "listener.name.scram.sasl.enabled.mechanisms",
                "SCRAM-SHA-512",
            ),
            (
                "listener.name.scram.scram-sha-512.sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            ),
            ("listener.name.oauth.sasl.enabled.mechanisms", "OAUTHBEARER"),
            (
                "listener.name.oauth.oauthbearer.sasl.jaas.config",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            ),
            (
                "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            ),
            // A session ends when its token does: a client authenticates
            // again with its next token, or is disconnected.
            (
                "listener.name.oauth.oauthbearer.connections.max.reauth.ms",
                "3600000",
            ),
            ("sasl.oauthbearer.jwks.endpoint.url", &jwks),
            ("sasl.oauthbearer.expected.audience", AUDIENCE),
            ("sasl.oauthbearer.expected.issuer", ISSUER),
            ("sasl.oauthbearer.clock.skew.seconds", "0"),
        ];
        let kafka = PrivateKafka::start_setup(Setup {
            settings: settings
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
            listeners: vec![
                ("SCRAM".into(), "SASL_SSL".into(), scram),
                ("MTLS".into(), "SSL".into(), mtls),
                ("OAUTH".into(), "SASL_SSL".into(), oauth),
            ],
            format_args: vec![
                "--add-scram".into(),
                format!("SCRAM-SHA-512=[name={SCRAM_USER},password={SCRAM_PASSWORD}]"),
            ],
            // Kafka 4 fetches a JWKS only from the URLs allowed here.
            jvm_args: vec![format!(
                "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={jwks}"
            )],
            dies_with_thread: true,
        });
        let secure = SecureKafka {
            plaintext: kafka.bootstrap(),
            scram: format!("127.0.0.1:{scram}"),
            mtls: format!("127.0.0.1:{mtls}"),
            oauth: format!("127.0.0.1:{oauth}"),
            tls,
            idp,
        };
        *RUNNING.lock().expect("the running broker") = Some((kafka, dir));
        secure
    }

    /// A file of [`SecureKafka::tls`], as a client's setting.
    pub fn file(&self, name: &str) -> String {
        self.tls.join(name).display().to_string()
    }

    /// The brokers' own log, for failure messages.
    pub fn log_text(&self) -> String {
        RUNNING
            .lock()
            .expect("the running broker")
            .as_ref()
            .map(|(kafka, _)| kafka.log_text())
            .unwrap_or_default()
    }
}

/// The CA, the broker's certificate (`broker.pem`: key and certificate, as
/// Kafka's PEM keystore takes them), a client's, another CA and a client
/// certificate it signed.
fn make_certificates(tls: &Path) {
    make_ca(tls, "ca", "/CN=inventory-inbox test CA");
    make_ca(tls, "other-ca", "/CN=another CA");
    issue(
        tls,
        "broker",
        "/CN=localhost",
        "subjectAltName=DNS:localhost,IP:127.0.0.1",
        "ca",
    );
    issue(
        tls,
        "client",
        "/CN=inventory-inbox",
        "keyUsage=digitalSignature",
        "ca",
    );
    issue(
        tls,
        "stranger",
        "/CN=inventory-inbox",
        "keyUsage=digitalSignature",
        "other-ca",
    );
    let pem = [
        std::fs::read(tls.join("broker.key")).expect("the broker's key"),
        std::fs::read(tls.join("broker.crt")).expect("the broker's certificate"),
    ]
    .concat();
    std::fs::write(tls.join("broker.pem"), pem).expect("write broker.pem");
}

/// A token the token endpoint gave.
#[derive(Debug, Clone)]
pub struct Issued {
    pub client_id: String,
    pub token: String,
    pub expires: SystemTime,
}

/// An OIDC identity provider of the test's: `GET /jwks` (its signing key),
/// `POST /token` (client credentials in HTTP Basic, RS256 JWTs). Served on
/// a thread of its own, one request at a time, for the binary's life.
pub struct IdentityProvider {
    port: u16,
    /// The RSA key tokens are signed with.
    key: PathBuf,
    jwks: String,
    issued: Mutex<Vec<Issued>>,
    /// Requests the token endpoint refused, by client id (or `?`).
    refused: Mutex<Vec<String>>,
}

impl IdentityProvider {
    fn start(dir: &Path) -> Arc<IdentityProvider> {
        let key = dir.join("token-signing.key");
        openssl(
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-out",
                &key.display().to_string(),
            ],
            b"",
        );
        let modulus = String::from_utf8(openssl(
            &[
                "rsa",
                "-in",
                &key.display().to_string(),
                "-noout",
                "-modulus",
            ],
            b"",
        ))
        .expect("openssl prints the modulus in hex");
        let modulus = modulus
            .trim()
            .strip_prefix("Modulus=")
            .expect("Modulus=HEX");
        let modulus: Vec<u8> = (0..modulus.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&modulus[at..at + 2], 16).expect("hex"))
            .collect();
        // genpkey's public exponent is 65537 (AQAB).
        let jwks = serde_json::json!({"keys": [{
            "kty": "RSA", "kid": "test-key", "use": "sig", "alg": "RS256",
            "n": base64_url(&modulus), "e": "AQAB",
        }]})
        .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the identity provider");
        let idp = Arc::new(IdentityProvider {
            port: listener.local_addr().expect("its address").port(),
            key,
            jwks,
            issued: Mutex::new(Vec::new()),
            refused: Mutex::new(Vec::new()),
        });
        let serving = idp.clone();
        std::thread::Builder::new()
            .name("identity-provider".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    serving.answer(stream);
                }
            })
            .expect("start the identity provider");
        idp
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The tokens given to `client_id`, oldest first.
    pub fn issued(&self, client_id: &str) -> Vec<Issued> {
        self.issued
            .lock()
            .expect("issued tokens")
            .iter()
            .filter(|issued| issued.client_id == client_id)
            .cloned()
            .collect()
    }

    /// Every token given, to any client.
    pub fn tokens(&self) -> Vec<String> {
        let issued = self.issued.lock().expect("issued tokens");
        issued.iter().map(|issued| issued.token.clone()).collect()
    }

    /// How many token requests were refused.
    pub fn refused(&self) -> usize {
        self.refused.lock().expect("refused requests").len()
    }

    fn answer(&self, stream: TcpStream) {
        let mut reader = BufReader::new(stream);
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).is_err() {
            return;
        }
        let mut authorization = String::new();
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                match name.trim().to_ascii_lowercase().as_str() {
                    "authorization" => authorization = value.trim().to_owned(),
                    "content-length" => length = value.trim().parse().unwrap_or(0),
                    _ => {}
                }
            }
        }
        let mut body = vec![0; length];
        let _ = reader.read_exact(&mut body);
        let (status, body) = if request_line.starts_with("GET /jwks") {
            ("200 OK", self.jwks.clone())
        } else if request_line.starts_with("POST /token") {
            self.token_response(&authorization)
        } else {
            ("404 Not Found", "{}".to_owned())
        };
        let mut stream = reader.into_inner();
        let _ = write!(
            stream,
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    }

    /// A token for a known client with the right secret (one that already
    /// expired for [`EXPIRED_CLIENT_ID`], one for another audience for
    /// [`OTHER_AUDIENCE_CLIENT_ID`]), else 401 `invalid_client`.
    fn token_response(&self, authorization: &str) -> (&'static str, String) {
        let clients = [CLIENT_ID, EXPIRED_CLIENT_ID, OTHER_AUDIENCE_CLIENT_ID];
        let client = clients.into_iter().find(|id| {
            authorization
                == format!(
                    "Basic {}",
                    base64(format!("{id}:{CLIENT_SECRET}").as_bytes())
                )
        });
        let Some(client_id) = client else {
            self.refused
                .lock()
                .expect("refused requests")
                .push(authorization.to_owned());
            return (
                "401 Unauthorized",
                r#"{"error":"invalid_client"}"#.to_owned(),
            );
        };
        let now = SystemTime::now();
        let expires = if client_id == EXPIRED_CLIENT_ID {
            now - Duration::from_secs(60)
        } else {
            now + TOKEN_LIFETIME
        };
        let seconds = |t: SystemTime| t.duration_since(UNIX_EPOCH).expect("after 1970").as_secs();
        let header = serde_json::json!({"alg": "RS256", "kid": "test-key", "typ": "JWT"});
        let audience = if client_id == OTHER_AUDIENCE_CLIENT_ID {
            "another-cluster"
        } else {
            AUDIENCE
        };
        let claims = serde_json::json!({
            "sub": client_id, "iss": ISSUER, "aud": audience,
            "iat": seconds(now), "exp": seconds(expires),
        });
        let signed = format!(
            "{}.{}",
            base64_url(header.to_string().as_bytes()),
            base64_url(claims.to_string().as_bytes())
        );
        let signature = openssl(
            &["dgst", "-sha256", "-sign", &self.key.display().to_string()],
            signed.as_bytes(),
        );
        let token = format!("{signed}.{}", base64_url(&signature));
        self.issued.lock().expect("issued tokens").push(Issued {
            client_id: client_id.to_owned(),
            token: token.clone(),
            expires,
        });
        let lifetime = seconds(expires).saturating_sub(seconds(now));
        (
            "200 OK",
            serde_json::json!({"access_token": token, "token_type": "bearer", "expires_in": lifetime})
                .to_string(),
        )
    }
}

/// Standard base64 with padding (HTTP Basic), from the URL-safe alphabet.
fn base64(bytes: &[u8]) -> String {
    let mut text: String = base64_url(bytes)
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    while !text.len().is_multiple_of(4) {
        text.push('=');
    }
    text
}
