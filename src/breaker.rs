//! The poison breaker: a producer that breaks (a bad deploy emitting
//! invalid events) would otherwise have every record parked, at full speed,
//! quietly. Past a run of parked records, or a share of a window of them,
//! the consumer stops taking records until an operator says so
//! (`inventory-inbox breaker resume`); the records after the trip wait in
//! Kafka, nothing is skipped. Pure: fed one record's fate at a time.

use std::collections::VecDeque;

/// When the breaker opens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerSettings {
    /// Parked records in a row that open it; 0: never (the breaker is off).
    pub consecutive: u64,
    /// Share of the last `window` records parked that opens it (only once
    /// `window` records were seen); 1.0 or more: never.
    pub share: f64,
    pub window: usize,
}

impl BreakerSettings {
    pub fn off() -> Self {
        BreakerSettings {
            consecutive: 0,
            share: 1.0,
            window: 1,
        }
    }

    pub fn is_off(&self) -> bool {
        self.consecutive == 0 && self.share >= 1.0
    }
}

/// The records seen since the breaker last closed.
#[derive(Debug)]
pub struct PoisonBreaker {
    settings: BreakerSettings,
    /// Parked records in a row, up to now.
    run: u64,
    /// The fates of the last `window` records (true: parked).
    recent: VecDeque<bool>,
    parked_in_window: usize,
}

impl PoisonBreaker {
    pub fn new(settings: BreakerSettings) -> Self {
        PoisonBreaker {
            settings,
            run: 0,
            recent: VecDeque::with_capacity(settings.window.min(1 << 16)),
            parked_in_window: 0,
        }
    }

    /// One record's fate, in offset order. Returns why the breaker opens,
    /// when it does.
    pub fn observe(&mut self, parked: bool) -> Option<String> {
        if self.settings.is_off() {
            return None;
        }
        self.run = if parked { self.run + 1 } else { 0 };
        self.recent.push_back(parked);
        self.parked_in_window += usize::from(parked);
        if self.recent.len() > self.settings.window {
            let left = self.recent.pop_front().unwrap_or(false);
            self.parked_in_window -= usize::from(left);
        }
        if self.settings.consecutive > 0 && self.run >= self.settings.consecutive {
            return Some(format!("{} records in a row were parked", self.run));
        }
        let full = self.recent.len() == self.settings.window;
        let share = self.parked_in_window as f64 / self.settings.window as f64;
        if full && self.settings.share < 1.0 && share > self.settings.share {
            return Some(format!(
                "{} of the last {} records were parked ({:.0} %)",
                self.parked_in_window,
                self.settings.window,
                share * 100.0
            ));
        }
        None
    }

    /// After an operator resumed: counting starts again.
    pub fn reset(&mut self) {
        self.run = 0;
        self.recent.clear();
        self.parked_in_window = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker(consecutive: u64, share: f64, window: usize) -> PoisonBreaker {
        PoisonBreaker::new(BreakerSettings {
            consecutive,
            share,
            window,
        })
    }

    #[test]
    fn a_run_of_parked_records_opens_it_and_one_applied_record_breaks_the_run() {
        let mut b = breaker(3, 1.0, 10);
        assert_eq!(b.observe(true), None);
        assert_eq!(b.observe(true), None);
        assert_eq!(b.observe(false), None);
        assert_eq!(b.observe(true), None);
        assert_eq!(b.observe(true), None);
        assert_eq!(
            b.observe(true).as_deref(),
            Some("3 records in a row were parked")
        );
        b.reset();
        assert_eq!(b.observe(true), None);
    }

    #[test]
    fn a_share_of_a_full_window_opens_it() {
        let mut b = breaker(0, 0.5, 4);
        // Three parked of the first three: the window is not full yet.
        for _ in 0..3 {
            assert_eq!(b.observe(true), None);
        }
        assert!(b.observe(false).unwrap().starts_with("3 of the last 4"));
        let mut b = breaker(0, 0.5, 4);
        for parked in [true, false, true, false, true, false] {
            assert_eq!(b.observe(parked), None, "half is not more than half");
        }
    }

    #[test]
    fn off_never_opens() {
        let mut b = PoisonBreaker::new(BreakerSettings::off());
        for _ in 0..100_000 {
            assert_eq!(b.observe(true), None);
        }
    }
}
