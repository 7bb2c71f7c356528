//! Where the loop is, and every way it moves, in one place.
//!
//! ```text
//! Consuming ── batch refused ──> Retrying ── batch settled ──> Consuming
//! Consuming, Retrying ── shutdown asked ──> Draining
//! any state ── fatal client error ──> Failed
//! ```
//!
//! Draining and Failed are the loop's last states: no new round starts in
//! either. Draining finishes the round in hand (a batch the database still
//! refuses is given up after `SHUTDOWN_GRACE`, uncommitted), then what the
//! database has is committed and the group left; Failed does the same, and
//! `run` reports the error. A fatal client error fails a draining loop too.

use std::time::Instant;

use rdkafka::error::KafkaError;

/// The loop's state.
#[derive(Debug)]
pub(super) enum State {
    /// Polling and applying rounds.
    Consuming,
    /// A batch the database refuses is retried, the partitions paused; the
    /// consumer keeps polling, so it stays in its group.
    Retrying,
    /// Shutdown was asked (SIGTERM/SIGINT) at `since`: the round in hand is
    /// finished, nothing new is polled.
    Draining { since: Instant },
    /// librdkafka gave up on this consumer.
    Failed(KafkaError),
}

/// What moves the loop from one state to another.
#[derive(Debug)]
pub(super) enum Event {
    /// The database refused a batch: it is retried.
    BatchRefused,
    /// The batch being retried is committed, or left to the partitions' new
    /// owner.
    BatchSettled,
    ShutdownAsked,
    ClientFailed(KafkaError),
}

impl State {
    /// The state after `event`: the whole transition table.
    pub(super) fn after(self, event: Event) -> State {
        match (self, event) {
            (State::Failed(error), _) => State::Failed(error),
            (_, Event::ClientFailed(error)) => State::Failed(error),
            (draining @ State::Draining { .. }, _) => draining,
            (_, Event::ShutdownAsked) => State::Draining {
                since: Instant::now(),
            },
            (State::Consuming | State::Retrying, Event::BatchRefused) => State::Retrying,
            (State::Consuming | State::Retrying, Event::BatchSettled) => State::Consuming,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            State::Consuming => "consuming",
            State::Retrying => "retrying",
            State::Draining { .. } => "draining",
            State::Failed(_) => "failed",
        }
    }

    /// Draining or failed: no new round starts.
    pub(super) fn is_stopping(&self) -> bool {
        matches!(self, State::Draining { .. } | State::Failed(_))
    }
}

/// The loop's state with its one way to change.
#[derive(Debug)]
pub(super) struct Machine {
    state: State,
}

impl Machine {
    pub(super) fn new() -> Machine {
        Machine {
            state: State::Consuming,
        }
    }

    pub(super) fn state(&self) -> &State {
        &self.state
    }

    /// Applies `event`, saying so when the state changes.
    pub(super) fn on(&mut self, event: Event) {
        let before = std::mem::replace(&mut self.state, State::Consuming);
        let from = before.name();
        self.state = before.after(event);
        if self.state.name() != from {
            tracing::debug!(from, to = self.state.name(), "pipeline state");
        }
    }

    /// The error the loop failed with, if it failed; consumes the machine.
    pub(super) fn into_failure(self) -> Option<KafkaError> {
        match self.state {
            State::Failed(error) => Some(error),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::types::RDKafkaErrorCode;

    fn fatal() -> KafkaError {
        KafkaError::MessageConsumptionFatal(RDKafkaErrorCode::FencedInstanceId)
    }

    fn names(events: Vec<Event>) -> Vec<&'static str> {
        let mut machine = Machine::new();
        events
            .into_iter()
            .map(|event| {
                machine.on(event);
                machine.state().name()
            })
            .collect()
    }

    #[test]
    fn a_refused_batch_retries_until_it_settles() {
        assert_eq!(
            names(vec![
                Event::BatchRefused,
                Event::BatchRefused,
                Event::BatchSettled
            ]),
            vec!["retrying", "retrying", "consuming"]
        );
    }

    #[test]
    fn shutdown_drains_from_any_live_state_and_nothing_brings_it_back() {
        assert_eq!(
            names(vec![
                Event::BatchRefused,
                Event::ShutdownAsked,
                Event::BatchSettled,
                Event::BatchRefused,
                Event::ShutdownAsked
            ]),
            vec!["retrying", "draining", "draining", "draining", "draining"]
        );
        assert_eq!(names(vec![Event::ShutdownAsked]), vec!["draining"]);
    }

    #[test]
    fn a_fatal_client_error_fails_every_state_and_is_final() {
        for before in [
            vec![],
            vec![Event::BatchRefused],
            vec![Event::ShutdownAsked],
        ] {
            let mut machine = Machine::new();
            for event in before {
                machine.on(event);
            }
            machine.on(Event::ClientFailed(fatal()));
            for event in [Event::BatchSettled, Event::ShutdownAsked] {
                machine.on(event);
            }
            assert!(machine.state().is_stopping());
            assert!(matches!(
                machine.into_failure(),
                Some(KafkaError::MessageConsumptionFatal(_))
            ));
        }
    }

    #[test]
    fn draining_remembers_when_it_began() {
        let mut machine = Machine::new();
        machine.on(Event::ShutdownAsked);
        let State::Draining { since } = *machine.state() else {
            panic!("draining")
        };
        machine.on(Event::BatchRefused);
        assert!(matches!(machine.state(), State::Draining { since: s } if *s == since));
    }
}
