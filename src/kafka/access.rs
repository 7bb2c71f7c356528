//! Whether the cluster lets the service in as it is configured. librdkafka
//! tells of a refused login, an untrusted certificate or the wrong security
//! protocol only in its error and log callbacks, and then tries again
//! without end: a client so configured waits for ever, repeating itself.
//! Here each of those is one line naming the setting to fix (never a
//! value), and a question to the cluster stops at the first of them
//! instead of waiting out its timeout.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::metadata::Metadata;
use rdkafka::ClientContext;

use super::KafkaSettings;

/// What the operator configured that decides how a refusal reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Security {
    /// `security.protocol`, lower-cased (`plaintext` when unset).
    pub protocol: String,
    /// `sasl.mechanism`, upper-cased (`GSSAPI`, librdkafka's default, when
    /// unset).
    pub mechanism: String,
    /// Whether a client certificate is configured (a file, a PEM or a
    /// keystore).
    pub client_certificate: bool,
}

impl Security {
    pub fn of(settings: &KafkaSettings) -> Security {
        let value = |key: &str| {
            settings
                .properties
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.trim().to_owned())
        };
        Security {
            protocol: value("security.protocol")
                .unwrap_or_else(|| "plaintext".into())
                .to_ascii_lowercase(),
            mechanism: value("sasl.mechanism")
                .or_else(|| value("sasl.mechanisms"))
                .unwrap_or_else(|| "GSSAPI".into())
                .to_ascii_uppercase(),
            client_certificate: [
                "ssl.certificate.location",
                "ssl.certificate.pem",
                "ssl.keystore.location",
            ]
            .iter()
            .any(|key| value(key).is_some_and(|v| !v.is_empty())),
        }
    }

    fn tls(&self) -> bool {
        self.protocol.ends_with("ssl")
    }
}

/// What librdkafka said, as one of the refusals it can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Report {
    /// A TLS client certificate librdkafka did not send: no CA the broker
    /// named signed it.
    CertificateNotSent,
    /// The connection closed before the broker answered the first request.
    ClosedAtFirstRequest,
    /// The token endpoint gave no token (its answer follows as an error).
    NoToken,
}

/// Names the settings by their variables, as the operator sets them.
const SASL_USERNAME: &str = "KAFKA_PROPERTY_SASL_USERNAME";
const SASL_PASSWORD: &str = "KAFKA_PROPERTY_SASL_PASSWORD";
const SASL_MECHANISM: &str = "KAFKA_PROPERTY_SASL_MECHANISM";
const SECURITY_PROTOCOL: &str = "KAFKA_PROPERTY_SECURITY_PROTOCOL";
const SSL_CA_LOCATION: &str = "KAFKA_PROPERTY_SSL_CA_LOCATION";
const SSL_CERTIFICATE_LOCATION: &str = "KAFKA_PROPERTY_SSL_CERTIFICATE_LOCATION";
const SSL_KEY_LOCATION: &str = "KAFKA_PROPERTY_SSL_KEY_LOCATION";
const OIDC_CLIENT_SECRET: &str = "KAFKA_PROPERTY_SASL_OAUTHBEARER_CLIENT_SECRET";
const OIDC_CLIENT_ID: &str = "KAFKA_PROPERTY_SASL_OAUTHBEARER_CLIENT_ID";
const OIDC_TOKEN_ENDPOINT: &str = "KAFKA_PROPERTY_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL";

/// Where docs/deploy.md lists these settings and these lines.
const DOC: &str = "docs/deploy.md \"Kafka over TLS and SASL\"";

/// The TLS alerts a broker sends a client whose certificate it refuses
/// (OpenSSL's words).
const CERTIFICATE_ALERTS: [&str; 4] = [
    "alert bad certificate",
    "alert certificate required",
    "alert unknown ca",
    "alert certificate unknown",
];

/// The line naming the setting to fix, when what librdkafka reported
/// (`text`: an error's reason or a log line, scrubbed) is the cluster
/// refusing this configuration; `None` for anything else (an outage, a
/// broker restarting), which is waited for as before. `seen` holds what
/// earlier reports of the same client showed.
fn refusal(
    security: &Security,
    text: &str,
    seen: &[Report],
    scrub: impl Fn(&str) -> String,
) -> Option<String> {
    let mechanism = security.mechanism.as_str();
    if let Some(reason) = after(text, "Failed to acquire SASL OAUTHBEARER token: ") {
        let reason = scrub(reason);
        return Some(if reason.contains("unexpired token") {
            let ago = expired_for(&reason).map_or(String::new(), |s| format!(" {s} s ago"));
            format!(
                "{OIDC_TOKEN_ENDPOINT}: the token endpoint handed out an OAUTHBEARER token that expired{ago}, by this host's clock: check the identity provider's token lifetime and both clocks ({DOC})"
            )
        } else {
            format!(
                "{OIDC_CLIENT_SECRET}: the token endpoint of {OIDC_TOKEN_ENDPOINT} refused to give this client a token ({reason}): check {OIDC_CLIENT_ID} and {OIDC_CLIENT_SECRET} ({DOC})"
            )
        });
    }
    if let Some(reason) = after(text, "SASL authentication error: ") {
        let reason = scrub(without_timing(reason));
        return Some(if mechanism == "OAUTHBEARER" {
            format!(
                "{OIDC_TOKEN_ENDPOINT}: the cluster refused the OAUTHBEARER token of the token endpoint ({reason}): the brokers take tokens signed by a key of their JWKS, for their audience and issuer, not expired ({DOC})"
            )
        } else if reason.contains("invalid credentials") {
            format!(
                "{SASL_PASSWORD}: the cluster refused the {mechanism} login of {SASL_USERNAME} (invalid credentials: a wrong password or an unknown user, which Kafka does not tell apart) ({DOC})"
            )
        } else {
            format!(
                "{SASL_MECHANISM}: the cluster refused the {mechanism} login ({reason}) ({DOC})"
            )
        });
    }
    if let Some(offered) = after(text, "broker's supported mechanisms: ") {
        let offered = without_timing(offered);
        return Some(if offered.is_empty() {
            format!(
                "{SECURITY_PROTOCOL}: the listener does not take SASL, which {SECURITY_PROTOCOL}={} asks for: set the protocol the listener speaks (PLAINTEXT or SSL) ({DOC})",
                security.protocol.to_ascii_uppercase()
            )
        } else {
            format!(
                "{SASL_MECHANISM}: the listener does not offer {mechanism} (it offers {offered}) ({DOC})"
            )
        });
    }
    if text.contains("certificate verify failed") {
        return Some(format!(
            "{SSL_CA_LOCATION}: the broker's TLS certificate is not trusted (certificate verify failed): it must be signed by a CA of ssl.ca.location (the system's CAs when unset) and name the host of KAFKA_BOOTSTRAP_SERVERS ({DOC})"
        ));
    }
    if security.tls() {
        if let Some(alert) = CERTIFICATE_ALERTS
            .iter()
            .find(|alert| text.contains(*alert))
        {
            return Some(if seen.contains(&Report::CertificateNotSent) {
                format!(
                    "{SSL_CERTIFICATE_LOCATION}: the listener requires a client certificate signed by a CA it trusts, and no CA it trusts signed this one (so none was sent; {alert}) ({DOC})"
                )
            } else if security.client_certificate {
                format!(
                    "{SSL_CERTIFICATE_LOCATION}: the broker refused this client's TLS certificate ({alert}): it must be signed by a CA the listener trusts ({DOC})"
                )
            } else {
                format!(
                    "{SSL_CERTIFICATE_LOCATION}: the listener requires a client certificate (mutual TLS; {alert}): set {SSL_CERTIFICATE_LOCATION} and {SSL_KEY_LOCATION} ({DOC})"
                )
            });
        }
    } else if seen
        .iter()
        .filter(|report| **report == Report::ClosedAtFirstRequest)
        .count()
        >= 2
    {
        // Twice: a broker that went down as it was asked closes once.
        return Some(format!(
            "{SECURITY_PROTOCOL}: the broker closed the connection at the first request, as a TLS listener does to a client without TLS: set {SECURITY_PROTOCOL}=SSL or SASL_SSL, as the listener is ({DOC})"
        ));
    }
    None
}

/// What a log line shows for later reports, if anything.
fn report_in(text: &str) -> Option<Report> {
    if text.contains("not sending any client certificates") {
        Some(Report::CertificateNotSent)
    } else if text.contains("Disconnected") && text.contains("in state APIVERSION_QUERY") {
        Some(Report::ClosedAtFirstRequest)
    } else if text.contains("Failed to retrieve OIDC token") {
        Some(Report::NoToken)
    } else {
        None
    }
}

/// How long ago, in seconds, the token librdkafka refused had expired
/// ("Must supply an unexpired token: now=1796595224284ms,
/// exp=1796595164000ms").
fn expired_for(reason: &str) -> Option<i64> {
    let millis = |marker: &str| -> Option<i64> {
        after(reason, marker)?
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    Some((millis("now=")? - millis("exp=")?) / 1000)
}

/// What follows `marker` in `text`.
fn after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    text.find(marker).map(|at| &text[at + marker.len()..])
}

/// librdkafka's reason without its "(after 318ms in state AUTH_REQ)".
fn without_timing(reason: &str) -> &str {
    reason
        .rfind(" (after ")
        .map_or(reason, |at| &reason[..at])
        .trim()
}

/// The context of the clients that ask the cluster one-off questions: it
/// keeps the first refusal librdkafka reports, and logs what librdkafka
/// says scrubbed of the operator's values, a refusal at debug level only
/// (the line that names the setting says it once).
pub struct AccessContext {
    settings: KafkaSettings,
    security: Security,
    /// The first refusal's line, and what earlier reports showed.
    state: Mutex<(Option<String>, Vec<Report>)>,
}

impl AccessContext {
    pub fn new(settings: &KafkaSettings) -> AccessContext {
        AccessContext {
            settings: settings.clone(),
            security: Security::of(settings),
            state: Mutex::new((None, Vec::new())),
        }
    }

    /// The first refusal reported, if any.
    pub fn refused(&self) -> Option<String> {
        self.state.lock().expect("access state").0.clone()
    }

    /// Notes a report (librdkafka's text as it is: the line quotes only
    /// parts of it, scrubbed); whether it was (part of) a refusal.
    fn note(&self, text: &str) -> bool {
        let mut state = self.state.lock().expect("access state");
        let (refused, seen) = &mut *state;
        let report = report_in(text);
        if let Some(report) = report {
            seen.push(report);
        }
        let line = refusal(&self.security, text, seen, |reason| {
            self.settings.scrub_text(reason)
        });
        let part = line.is_some() || report.is_some();
        if refused.is_none() {
            *refused = line;
        }
        part
    }
}

impl ClientContext for AccessContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        let part = self.note(log_message);
        let message = self.settings.scrub_text(log_message);
        if part {
            tracing::debug!(target: "librdkafka", "librdkafka: {fac} {message}");
            return;
        }
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", "librdkafka: {fac} {message}")
            }
            RDKafkaLogLevel::Warning => {
                tracing::warn!(target: "librdkafka", "librdkafka: {fac} {message}")
            }
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", "librdkafka: {fac} {message}")
            }
            RDKafkaLogLevel::Debug => {
                tracing::debug!(target: "librdkafka", "librdkafka: {fac} {message}")
            }
        }
    }

    /// These clients are used once: their statistics say nothing.
    fn stats(&self, _: rdkafka::Statistics) {}

    fn error(&self, error: KafkaError, reason: &str) {
        let part = self.note(reason);
        let reason = self.settings.scrub_text(reason);
        if part {
            tracing::debug!("librdkafka: {error}: {reason}");
        } else {
            tracing::error!("librdkafka: {error}: {reason}");
        }
    }
}

/// They never join a group: rust-rdkafka's defaults.
impl rdkafka::consumer::ConsumerContext for AccessContext {}

/// Why the cluster was not asked: it refused this configuration (the line
/// naming the setting), or librdkafka's own error.
#[derive(Debug)]
pub enum Unanswered {
    Refused(String),
    Kafka(KafkaError),
}

/// The cluster's metadata (of `topic`, or of every topic), asked again
/// until it answers, refuses this configuration, or `timeout` passes.
/// Blocks.
pub fn metadata(
    client: &BaseConsumer<AccessContext>,
    topic: Option<&str>,
    timeout: Duration,
) -> Result<Metadata, Unanswered> {
    /// How often a refusal is looked for while the cluster does not answer.
    const STEP: Duration = Duration::from_millis(250);
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let result = client.fetch_metadata(topic, left.min(STEP));
        // librdkafka's errors and logs reach the context only as the
        // client is polled; one that is assigned nothing gets no messages.
        while client.poll(Duration::ZERO).is_some() {}
        if let Some(line) = client.context().refused() {
            return Err(Unanswered::Refused(line));
        }
        match result {
            Ok(metadata) => return Ok(metadata),
            Err(error) if Instant::now() >= deadline => return Err(Unanswered::Kafka(error)),
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn security(protocol: &str, mechanism: &str, client_certificate: bool) -> Security {
        Security {
            protocol: protocol.into(),
            mechanism: mechanism.into(),
            client_certificate,
        }
    }

    /// The settings a line names first.
    fn named(line: Option<String>) -> String {
        line.unwrap_or_default()
            .split(':')
            .next()
            .unwrap_or_default()
            .to_owned()
    }

    #[test]
    fn the_security_settings_are_read_from_the_properties() {
        let settings = KafkaSettings {
            bootstrap_servers: "b:9093".into(),
            group_protocol: super::super::GroupProtocol::Classic,
            properties: vec![
                ("security.protocol".into(), "SASL_SSL".into()),
                ("sasl.mechanism".into(), "scram-sha-512".into()),
                ("ssl.certificate.location".into(), "/c.pem".into()),
            ],
        };
        assert_eq!(
            Security::of(&settings),
            security("sasl_ssl", "SCRAM-SHA-512", true)
        );
    }

    #[test]
    fn each_refusal_names_the_setting_to_fix() {
        let scram = security("sasl_ssl", "SCRAM-SHA-512", false);
        let oidc = security("sasl_ssl", "OAUTHBEARER", false);
        let mtls = security("ssl", "GSSAPI", false);
        for (security, text, setting) in [
            (&scram, "sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 318ms in state AUTH_REQ)", SASL_PASSWORD),
            (&scram, "sasl_ssl://127.0.0.1:9093/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured (after 54ms in state SSL_HANDSHAKE)", SSL_CA_LOCATION),
            (&mtls, "ssl://127.0.0.1:9094/bootstrap: Receive failed: error:0A000412:SSL routines::sslv3 alert bad certificate: SSL alert number 42 (after 2ms in state APIVERSION_QUERY)", SSL_CERTIFICATE_LOCATION),
            (&oidc, "Failed to acquire SASL OAUTHBEARER token: {\"error\":\"invalid_client\"}", OIDC_CLIENT_SECRET),
            (&oidc, "Failed to acquire SASL OAUTHBEARER token: Must supply an unexpired token: now=1796595224284ms, exp=1796595164000ms", OIDC_TOKEN_ENDPOINT),
            (&oidc, "sasl_ssl://127.0.0.1:9095/bootstrap: SASL authentication error: {\"status\":\"invalid_token\"} (after 3ms in state AUTH_REQ)", OIDC_TOKEN_ENDPOINT),
            (&security("sasl_plaintext", "PLAIN", false), "SASL PLAIN mechanism handshake failed: Broker: Request not valid in current SASL state: broker's supported mechanisms:  (after 26ms in state AUTH_HANDSHAKE)", SECURITY_PROTOCOL),
            (&scram, "SASL SCRAM-SHA-512 mechanism handshake failed: Broker: Unsupported SASL mechanism: broker's supported mechanisms: PLAIN", SASL_MECHANISM),
        ] {
            assert_eq!(named(refusal(security, text, &[], str::to_owned)), setting, "{text}");
        }
        let line = refusal(&scram, "SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 318ms in state AUTH_REQ)", &[], str::to_owned).unwrap();
        assert!(!line.contains("after 318ms"), "{line}");
        let expired = refusal(&oidc, "Failed to acquire SASL OAUTHBEARER token: Must supply an unexpired token: now=1796595224284ms, exp=1796595164000ms", &[], str::to_owned).unwrap();
        assert!(
            expired.contains("expired 60 s ago, by this host's clock"),
            "{expired}"
        );
    }

    #[test]
    fn a_client_certificate_refused_says_whether_one_was_sent() {
        let alert = "Receive failed: error:0A000412:SSL routines::sslv3 alert bad certificate: SSL alert number 42";
        let sent = security("ssl", "GSSAPI", true);
        let not_sent = refusal(&sent, alert, &[Report::CertificateNotSent], str::to_owned).unwrap();
        assert!(
            not_sent.contains("no CA it trusts signed this one"),
            "{not_sent}"
        );
        let refused = refusal(&sent, alert, &[], str::to_owned).unwrap();
        assert!(
            refused.contains("refused this client's TLS certificate"),
            "{refused}"
        );
        let none = refusal(&security("ssl", "GSSAPI", false), alert, &[], str::to_owned).unwrap();
        assert!(
            none.contains("requires a client certificate (mutual TLS"),
            "{none}"
        );
        // Not a TLS client: an alert it cannot have had is no refusal.
        assert_eq!(
            refusal(
                &security("plaintext", "GSSAPI", false),
                alert,
                &[],
                str::to_owned
            ),
            None
        );
    }

    #[test]
    fn a_plaintext_client_on_a_tls_listener_is_told_after_two_closes() {
        let closed = "127.0.0.1:9093/bootstrap: Disconnected: connection closed by peer: receive 0 after POLLIN (after 31ms in state APIVERSION_QUERY)";
        assert_eq!(report_in(closed), Some(Report::ClosedAtFirstRequest));
        let plaintext = security("plaintext", "GSSAPI", false);
        assert_eq!(
            refusal(
                &plaintext,
                closed,
                &[Report::ClosedAtFirstRequest],
                str::to_owned
            ),
            None
        );
        let twice = [Report::ClosedAtFirstRequest; 2];
        assert_eq!(
            named(refusal(&plaintext, closed, &twice, str::to_owned)),
            SECURITY_PROTOCOL
        );
        // A TLS client closed early is something else (a broker going down).
        assert_eq!(
            refusal(
                &security("ssl", "GSSAPI", false),
                closed,
                &twice,
                str::to_owned
            ),
            None
        );
    }

    #[test]
    fn an_outage_is_no_refusal() {
        let scram = security("sasl_ssl", "SCRAM-SHA-512", false);
        for text in [
            "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused (after 0ms in state CONNECT)",
            "1/1 brokers are down",
            "Disconnected: SSL connection closed by peer (after 11ms in state UP)",
        ] {
            assert_eq!(refusal(&scram, text, &[], str::to_owned), None, "{text}");
            assert_eq!(report_in(text), None, "{text}");
        }
    }
}
