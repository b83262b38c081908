//! `evaluate()` calls gathered into messages of the batch form, as the TypeScript client gathers
//! them (docs/client.md, "Many events in one message").
//!
//! A call made while no message is out goes at once, alone, in the single form: a lone caller
//! waits for nothing and sends what it always sent. A call made while a message is out waits in a
//! queue, which goes as one message when the last message out has been answered, when it reaches
//! `max_events`, `max_bytes` or `max_recipients`, or `window` after its first call. Under load the
//! events of many callers share one message, one reply and one bulk read of their recipients'
//! rules; a message out for long (a large room) delays the others by `window` at most.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::value::RawValue;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::calls::bad_reply;
use crate::error::{ErrorKind, PushRulesError, TransportFailure};
use crate::evaluate_wire::{batch_form, single_form};
use crate::json::nests_deeper_than;
use crate::rpc::Envelope;

/// How `evaluate()` calls are gathered into one message. The defaults are the TypeScript
/// client's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvaluateCoalescing {
    /// How long a call may wait for others to join its message while another is out. Tokio's
    /// timers count whole milliseconds, so the default 0.5 ms waits up to about 1 ms.
    pub window: Duration,
    /// Events per message at most; the workers take `evaluate.maxBatchEvents` (256).
    pub max_events: usize,
    /// The events' JSON per message at most, in bytes; the workers take
    /// `evaluate.maxRequestBytes` (4 MiB).
    pub max_bytes: usize,
    /// Recipients of the events of one message together at most: the workers'
    /// `evaluate.maxBatchRecipients`.
    pub max_recipients: usize,
    /// The workers' `limits.maxJsonDepth`. The batch form nests an event two levels deeper than
    /// the single form: an event deeper than this less two goes alone, and fails alone if it must.
    pub max_json_depth: usize,
}

impl Default for EvaluateCoalescing {
    fn default() -> Self {
        Self {
            window: Duration::from_micros(500),
            max_events: 64,
            max_bytes: 1 << 20,
            max_recipients: 20_000,
            max_json_depth: 32,
        }
    }
}

/// One event's answer: the body of its own reply envelope, or why it has none.
pub(crate) type Answer = Result<Box<RawValue>, PushRulesError>;

/// Sends one message to the evaluate queue, waiting for its reply until the deadline: the
/// client's RPC, or a test's stand-in.
pub(crate) type SendEvaluate =
    Arc<dyn Fn(Vec<u8>, Instant) -> Pin<Box<dyn Future<Output = Answer> + Send>> + Send + Sync>;

struct Waiting {
    /// Its entry: the single form without `op`.
    json: Vec<u8>,
    recipients: usize,
    deadline: Instant,
    /// Closed once its caller stopped waiting (its deadline, or a dropped call): not sent then.
    answer: oneshot::Sender<Answer>,
}

#[derive(Default)]
struct State {
    queue: Vec<Waiting>,
    queued_bytes: usize,
    queued_recipients: usize,
    /// Messages sent and not yet answered, or answered and holding the way for their callers'
    /// next calls (see `finish`).
    outstanding: usize,
    /// Bumped by every flush: a window timer set for an earlier queue does nothing.
    generation: u64,
    window_set: bool,
}

pub(crate) struct EvaluateCoalescer {
    settings: EvaluateCoalescing,
    send: SendEvaluate,
    state: Mutex<State>,
}

impl EvaluateCoalescer {
    pub fn new(settings: EvaluateCoalescing, send: SendEvaluate) -> Arc<Self> {
        let settings = EvaluateCoalescing {
            max_events: settings.max_events.max(1),
            ..settings
        };
        Arc::new(Self {
            settings,
            send,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent across a panic elsewhere: no section below panics midway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One event's answer. `json` is its entry, `recipients` how many it names; the call fails
    /// with `timeout` at `deadline` even if its message is still out.
    pub async fn evaluate(
        self: &Arc<Self>,
        json: Vec<u8>,
        recipients: usize,
        deadline: Instant,
    ) -> Answer {
        let (answer, answered) = oneshot::channel();
        let waiting = Waiting {
            json,
            recipients,
            deadline,
            answer,
        };
        let alone = {
            let mut state = self.state();
            let idle = state.outstanding == 0 && state.queue.is_empty();
            // Never in a batch: the single form takes it, or refuses it alone.
            if idle
                || nests_deeper_than(
                    &waiting.json,
                    self.settings.max_json_depth.saturating_sub(2),
                )
            {
                state.outstanding += 1;
                Some(waiting)
            } else {
                self.enqueue(&mut state, waiting)
            }
        };
        if let Some(waiting) = alone {
            self.spawn_message(vec![waiting]);
        }
        // Sent from a task of its own: a call dropped midway leaves the count of messages out right.
        match tokio::time::timeout_at(deadline, answered).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(PushRulesError::Transport(TransportFailure::Closed)),
            Err(_) => Err(PushRulesError::Transport(TransportFailure::Timeout)),
        }
    }

    /// Queues `waiting`; what must go now as a message of its own (already counted as out).
    fn enqueue(self: &Arc<Self>, state: &mut State, waiting: Waiting) -> Option<Waiting> {
        let caps = &self.settings;
        let bytes = waiting.json.len();
        let recipients = waiting.recipients;
        if !state.queue.is_empty()
            && (state.queued_bytes + bytes > caps.max_bytes
                || state.queued_recipients + recipients > caps.max_recipients)
        {
            self.flush(state);
        }
        state.queue.push(waiting);
        state.queued_bytes += bytes;
        state.queued_recipients += recipients;
        if state.queue.len() >= caps.max_events
            || state.queued_bytes >= caps.max_bytes
            || state.queued_recipients >= caps.max_recipients
        {
            self.flush(state);
        } else if !state.window_set {
            state.window_set = true;
            let generation = state.generation;
            let this = Arc::clone(self);
            tokio::spawn(async move {
                tokio::time::sleep(this.settings.window).await;
                let mut state = this.state();
                if state.generation == generation {
                    this.flush(&mut state);
                }
            });
        }
        None
    }

    /// Sends what is queued, those still waited for, as one message.
    fn flush(self: &Arc<Self>, state: &mut State) {
        state.generation += 1;
        state.window_set = false;
        state.queued_bytes = 0;
        state.queued_recipients = 0;
        let queued: Vec<Waiting> = std::mem::take(&mut state.queue)
            .into_iter()
            .filter(|w| !w.answer.is_closed())
            .collect();
        if !queued.is_empty() {
            state.outstanding += 1;
            self.spawn_message(queued);
        }
    }

    /// Fails the calls still waiting with `closed` (the messages out fail with the connection).
    pub fn close(&self) {
        let queued = {
            let mut state = self.state();
            state.generation += 1;
            state.window_set = false;
            state.queued_bytes = 0;
            state.queued_recipients = 0;
            std::mem::take(&mut state.queue)
        };
        for waiting in queued {
            let _ = waiting
                .answer
                .send(Err(PushRulesError::Transport(TransportFailure::Closed)));
        }
    }

    /// One message for `waiting`, already counted as out: the single form for one event, else the
    /// batch form; its deadline the latest of its calls'.
    fn spawn_message(self: &Arc<Self>, waiting: Vec<Waiting>) {
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let events = waiting.len();
            let deadline = waiting.iter().map(|w| w.deadline).max().expect("not empty");
            let body = match waiting.as_slice() {
                [only] => single_form(&only.json),
                _ => batch_form(waiting.iter().map(|w| w.json.as_slice())),
            };
            let reply = (this.send)(body, deadline).await;
            this.answer(waiting, reply);
            this.finish(events).await;
        });
    }

    fn answer(self: &Arc<Self>, waiting: Vec<Waiting>, reply: Answer) {
        if let [_] = waiting.as_slice() {
            let only = waiting.into_iter().next().expect("one");
            let _ = only.answer.send(reply);
            return;
        }
        match reply {
            Ok(body) => match per_event(&body, waiting.len()) {
                Some(results) => {
                    for (w, answer) in waiting.into_iter().zip(results) {
                        let _ = w.answer.send(answer);
                    }
                }
                None => {
                    for w in waiting {
                        let _ = w.answer.send(Err(bad_reply()));
                    }
                }
            },
            // The refusal may be one event's doing (a depth or size the batch form adds, a total
            // past the workers' caps, a worker that predates the batch form): alone, each gets its
            // own answer, with what is left of its own deadline.
            Err(PushRulesError::Worker(error))
                if matches!(error.kind, ErrorKind::TooLarge | ErrorKind::BadJson) =>
            {
                for w in waiting.into_iter().filter(|w| !w.answer.is_closed()) {
                    self.state().outstanding += 1;
                    self.spawn_message(vec![w]);
                }
            }
            // Unavailable and the like: what each event would meet alone too.
            Err(error) => {
                for w in waiting {
                    let _ = w.answer.send(Err(error.clone()));
                }
            }
        }
    }

    /// Counts a message as answered. One of several events holds the way until its callers have
    /// run, so that the calls they make at once when answered queue up and go together; one of one
    /// event frees it at once (its caller calling again goes alone, as a lone caller does) unless
    /// calls are queued behind it, which then go with whatever its caller sends next.
    async fn finish(self: &Arc<Self>, events: usize) {
        let hold = events > 1 || {
            let state = self.state();
            state.outstanding == 1 && !state.queue.is_empty()
        };
        if hold {
            // Tokio's end of a turn: the tasks the answers woke run before this one resumes.
            tokio::task::yield_now().await;
        }
        let mut state = self.state();
        state.outstanding -= 1;
        if state.outstanding == 0 && !state.queue.is_empty() {
            self.flush(&mut state);
        }
    }
}

/// The batch reply's `results`, when it holds one envelope per event.
fn per_event(body: &RawValue, count: usize) -> Option<Vec<Answer>> {
    #[derive(serde::Deserialize)]
    struct Results {
        results: Vec<Envelope>,
    }
    let Results { results } = serde_json::from_str(body.get()).ok()?;
    (results.len() == count).then(|| results.into_iter().map(Envelope::into_result).collect())
}

#[cfg(test)]
#[path = "evaluate_coalescer_tests/mod.rs"]
mod tests;
