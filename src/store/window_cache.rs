//! The dedup window as this member last read it from the database, and
//! when: batches are classified against it, and it is read again once it
//! is a minute old (a day created or dropped by maintenance since) or when
//! a batch names a day whose partition is gone.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::window::DedupWindow;

/// How often the dedup window is re-read even when nothing failed.
pub(super) const WINDOW_REFRESH: Duration = Duration::from_secs(60);

/// The window last read, and when (never: empty, and `None`).
#[derive(Debug, Default)]
pub struct WindowCache {
    read: Mutex<(DedupWindow, Option<Instant>)>,
}

impl WindowCache {
    /// The window as last read, however old (empty before the first read):
    /// what a batch is classified against.
    pub fn latest(&self) -> DedupWindow {
        self.read.lock().expect("window lock").0.clone()
    }

    /// The window as of `now`, unless it was read more than the refresh
    /// period before.
    pub fn as_of(&self, now: Instant) -> Option<DedupWindow> {
        let guard = self.read.lock().expect("window lock");
        match guard.1 {
            Some(read) if now.saturating_duration_since(read) <= WINDOW_REFRESH => {
                Some(guard.0.clone())
            }
            _ => None,
        }
    }

    /// Keeps `window` as read now.
    pub(super) fn read_now(&self, window: DedupWindow) {
        *self.read.lock().expect("window lock") = (window, Some(Instant::now()));
    }
}
