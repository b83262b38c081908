//! One connection to one node of the broker, replaced on loss.
//!
//! As the TypeScript and Python clients do it: the nodes are shuffled once per client; when the
//! connection is lost, the next node is tried at once, round-robin; only after a whole round failed
//! does it wait (capped, jittered backoff) before the next round. While it waits, callers are
//! refused at once (a caller with a deadline is not held for a broker that is not there); while a
//! round is under way they wait for it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tracing::{info, warn};

use crate::broker_urls::BrokerAddress;
use crate::error::TransportFailure;
use crate::session::{Session, SessionSettings};

#[derive(Clone)]
enum State {
    Idle,
    Connecting,
    /// Between two failed rounds.
    Waiting,
    Connected(Arc<Session>),
    Closed,
}

pub(crate) struct Broker {
    nodes: Vec<BrokerAddress>,
    next: AtomicUsize,
    settings: SessionSettings,
    backoff: (Duration, Duration),
    state: watch::Sender<State>,
}

impl Broker {
    pub fn new(
        mut nodes: Vec<BrokerAddress>,
        settings: SessionSettings,
        backoff: (Duration, Duration),
    ) -> Arc<Self> {
        fastrand::shuffle(&mut nodes);
        Arc::new(Self {
            nodes,
            next: AtomicUsize::new(0),
            settings,
            backoff,
            state: watch::channel(State::Idle).0,
        })
    }

    /// `host:port` of the node the client is connected to, if it is.
    pub fn label(&self) -> Option<String> {
        match &*self.state.borrow() {
            State::Connected(session) if !session.is_lost() => Some(session.label.clone()),
            _ => None,
        }
    }

    /// The live session, or the one the round under way opens. `Closed` once closed;
    /// `ConnectionLost` between two failed rounds.
    pub async fn session(self: &Arc<Self>) -> Result<Arc<Session>, TransportFailure> {
        let mut state = self.state.subscribe();
        loop {
            let current = state.borrow_and_update().clone();
            match current {
                State::Connected(session) if !session.is_lost() => return Ok(session),
                // Lost, and its watcher has not run yet.
                State::Connected(session) => self.lost(&session),
                State::Closed => return Err(TransportFailure::Closed),
                State::Waiting => return Err(TransportFailure::ConnectionLost),
                State::Idle => self.start(),
                State::Connecting => {
                    if state.changed().await.is_err() {
                        return Err(TransportFailure::Closed);
                    }
                }
            }
        }
    }

    /// Fails the pending calls with `closed` and disconnects. Idempotent.
    pub async fn close(&self) {
        if let State::Connected(session) = self.state.send_replace(State::Closed) {
            session.retire(TransportFailure::Closed);
            session.close(self.settings.connect_timeout).await;
        }
    }

    /// `close` for a client dropped without it: the connection closes in the background.
    pub fn close_in_background(&self) {
        if let State::Connected(session) = self.state.send_replace(State::Closed) {
            session.retire(TransportFailure::Closed);
            let within = self.settings.connect_timeout;
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { session.close(within).await });
            }
        }
    }

    fn start(self: &Arc<Self>) {
        let started = self.state.send_if_modified(|state| match state {
            State::Idle => {
                *state = State::Connecting;
                true
            }
            _ => false,
        });
        if started {
            tokio::spawn(self.clone().attempts());
        }
    }

    /// From `from` to `to`, unless the state moved on (closed) meanwhile.
    fn advance(&self, from: fn(&State) -> bool, to: State) -> bool {
        self.state.send_if_modified(|state| {
            if from(state) {
                *state = to;
                true
            } else {
                false
            }
        })
    }

    async fn attempts(self: Arc<Self>) {
        let mut failures = 0usize;
        let mut rounds = 0u32;
        loop {
            let node = &self.nodes[self.next.fetch_add(1, Ordering::Relaxed) % self.nodes.len()];
            match Session::open(node, &self.settings).await {
                Ok(session) => {
                    let connecting = |state: &State| matches!(state, State::Connecting);
                    if !self.advance(connecting, State::Connected(session.clone())) {
                        session.retire(TransportFailure::Closed);
                        session.close(self.settings.connect_timeout).await;
                        return;
                    }
                    info!(broker = %node.label, "connected to RabbitMQ");
                    tokio::spawn(watch_session(Arc::downgrade(&self), session));
                    return;
                }
                Err(error) => {
                    if matches!(*self.state.borrow(), State::Closed) {
                        return;
                    }
                    failures += 1;
                    if !failures.is_multiple_of(self.nodes.len()) {
                        warn!(broker = %node.label, "cannot reach RabbitMQ ({error}); trying the next node");
                        continue;
                    }
                    rounds += 1;
                    let delay = self.delay(rounds);
                    warn!(broker = %node.label, "cannot reach RabbitMQ ({error}, round {rounds}); retrying in {delay:?}");
                    let connecting = |state: &State| matches!(state, State::Connecting);
                    if !self.advance(connecting, State::Waiting) {
                        return;
                    }
                    let mut state = self.state.subscribe();
                    let closed = state.wait_for(|state| matches!(state, State::Closed));
                    if tokio::time::timeout(delay, closed).await.is_ok() {
                        return;
                    }
                    let waiting = |state: &State| matches!(state, State::Waiting);
                    if !self.advance(waiting, State::Connecting) {
                        return;
                    }
                }
            }
        }
    }

    /// Full jitter under a cap doubling per failed round, never under the base.
    fn delay(&self, round: u32) -> Duration {
        let (base, maximum) = self.backoff;
        let cap = base
            .saturating_mul(1 << round.saturating_sub(1).min(16))
            .min(maximum);
        cap.mul_f64(fastrand::f64()).max(base)
    }

    /// The session went: its calls fail, and the next node is tried at once.
    fn lost(self: &Arc<Self>, session: &Arc<Session>) {
        session.lose("lost");
        let replaced = self.state.send_if_modified(|state| match state {
            State::Connected(live) if Arc::ptr_eq(live, session) => {
                *state = State::Idle;
                true
            }
            _ => false,
        });
        if replaced {
            let session = session.clone();
            let within = self.settings.connect_timeout;
            tokio::spawn(async move { session.close(within).await });
            self.start();
        }
    }
}

async fn watch_session(broker: Weak<Broker>, session: Arc<Session>) {
    session.until_lost().await;
    if let Some(broker) = broker.upgrade() {
        broker.lost(&session);
    }
}
