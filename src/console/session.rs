//! Who may act in the console: a browser that signed in with
//! INBOX_CONSOLE_TOKEN holds a session cookie (HttpOnly, SameSite=Strict),
//! and each of its forms carries the session's CSRF token, which every
//! POST must send back. Without a token configured the console is
//! read-only: nobody signs in. Sessions live in memory: a restart of the
//! console signs everyone out.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::RngCore;

/// The cookie that names a session.
pub const COOKIE: &str = "inbox_console_session";

/// How long a session lasts after its sign-in.
const LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// Sessions kept at most; the oldest goes first.
const MOST_SESSIONS: usize = 64;

/// The signed-in sessions of a console, and its token.
pub struct Sessions {
    token: Option<String>,
    /// Session id -> its CSRF token and when it was signed in.
    open: Mutex<HashMap<String, (String, Instant)>>,
}

/// A request's standing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// No token is configured: nobody may act.
    ReadOnly,
    /// A token is configured and this browser has not signed in.
    SignedOut,
    /// Signed in; the CSRF token its forms carry.
    SignedIn { csrf: String },
}

impl Standing {
    pub fn signed_in(&self) -> bool {
        matches!(self, Standing::SignedIn { .. })
    }

    pub fn csrf(&self) -> &str {
        match self {
            Standing::SignedIn { csrf } => csrf,
            _ => "",
        }
    }
}

impl Sessions {
    pub fn new(token: Option<&str>) -> Self {
        Sessions {
            token: token.map(str::to_owned),
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The standing of a request with this `Cookie` header.
    pub fn standing(&self, cookie_header: Option<&str>) -> Standing {
        if self.token.is_none() {
            return Standing::ReadOnly;
        }
        let Some(session) = cookie_header.and_then(session_of) else {
            return Standing::SignedOut;
        };
        let mut open = self.open.lock().expect("sessions");
        open.retain(|_, (_, since)| since.elapsed() < LIFETIME);
        match open.get(session) {
            Some((csrf, _)) => Standing::SignedIn { csrf: csrf.clone() },
            None => Standing::SignedOut,
        }
    }

    /// A new session when `offered` is the token: its id (for the cookie).
    pub fn sign_in(&self, offered: &str) -> Option<String> {
        let token = self.token.as_deref()?;
        if !same(token.as_bytes(), offered.as_bytes()) {
            return None;
        }
        let (session, csrf) = (random_hex(), random_hex());
        let mut open = self.open.lock().expect("sessions");
        if open.len() >= MOST_SESSIONS {
            let oldest = open
                .iter()
                .min_by_key(|(_, (_, since))| *since)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                open.remove(&oldest);
            }
        }
        open.insert(session.clone(), (csrf, Instant::now()));
        Some(session)
    }

    /// Ends the session this `Cookie` header names.
    pub fn sign_out(&self, cookie_header: Option<&str>) {
        if let Some(session) = cookie_header.and_then(session_of) {
            self.open.lock().expect("sessions").remove(session);
        }
    }
}

/// The `Set-Cookie` value of a new session.
pub fn set_cookie(session: &str) -> String {
    format!(
        "{COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
        LIFETIME.as_secs()
    )
}

/// The `Set-Cookie` value that ends a session in the browser.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// Whether a form's CSRF token is the session's.
pub fn csrf_matches(standing: &Standing, offered: Option<&str>) -> bool {
    match (standing, offered) {
        (Standing::SignedIn { csrf }, Some(offered)) => same(csrf.as_bytes(), offered.as_bytes()),
        _ => false,
    }
}

fn session_of(header: &str) -> Option<&str> {
    header.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name == COOKIE && !value.is_empty()).then_some(value)
    })
}

/// Equal, in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_token_nobody_signs_in() {
        let sessions = Sessions::new(None);
        assert_eq!(sessions.sign_in(""), None);
        assert_eq!(sessions.standing(Some("x=y")), Standing::ReadOnly);
    }

    #[test]
    fn the_token_opens_a_session_whose_csrf_token_alone_is_accepted() {
        let sessions = Sessions::new(Some("a-long-enough-token"));
        assert_eq!(sessions.sign_in("wrong"), None);
        let session = sessions.sign_in("a-long-enough-token").expect("signed in");
        let cookie = format!("other=1; {COOKIE}={session}");
        let standing = sessions.standing(Some(&cookie));
        assert!(standing.signed_in());
        assert!(csrf_matches(&standing, Some(standing.csrf())));
        assert!(!csrf_matches(&standing, Some("forged")));
        assert!(!csrf_matches(&standing, None));
        sessions.sign_out(Some(&cookie));
        assert_eq!(sessions.standing(Some(&cookie)), Standing::SignedOut);
    }
}
