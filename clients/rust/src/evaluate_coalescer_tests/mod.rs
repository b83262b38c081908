//! The coalescer against a stand-in for the evaluate queue that the test answers by hand: which
//! calls go together (`gathering`), and what each call gets (`answers`).

mod answers;
mod gathering;

use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{timeout, Instant};

use super::{Answer, EvaluateCoalescer, EvaluateCoalescing, SendEvaluate};
use crate::error::{ErrorBody, ErrorKind, PushRulesError, TransportFailure};

/// A message the coalescer sent, waiting for the test's answer.
struct Sent {
    body: Value,
    deadline: Instant,
    reply: oneshot::Sender<Answer>,
}

impl Sent {
    /// The event IDs it carries, and whether in the batch form.
    fn events(&self) -> (Vec<String>, bool) {
        match self.body.get("events") {
            Some(events) => (events.as_array().unwrap().iter().map(id).collect(), true),
            None => (vec![id(&self.body)], false),
        }
    }

    fn answer(self, body: Value) {
        let _ = self.reply.send(Ok(raw(body)));
    }

    fn fail(self, error: PushRulesError) {
        let _ = self.reply.send(Err(error));
    }
}

fn id(entry: &Value) -> String {
    entry["event"]["event_id"].as_str().unwrap().to_owned()
}

fn raw(value: Value) -> Box<RawValue> {
    RawValue::from_string(value.to_string()).unwrap()
}

/// The queue as the coalescer sees it, and the messages sent to it.
struct Queue {
    coalescer: Arc<EvaluateCoalescer>,
    sent: mpsc::UnboundedReceiver<Sent>,
}

/// A long window: only what the test does sends a queue, unless it sets its own.
fn settings() -> EvaluateCoalescing {
    EvaluateCoalescing {
        window: Duration::from_secs(60),
        ..EvaluateCoalescing::default()
    }
}

fn queue(settings: EvaluateCoalescing) -> Queue {
    let (to_test, sent) = mpsc::unbounded_channel();
    let send: SendEvaluate = Arc::new(move |body: Vec<u8>, deadline| {
        let (reply, answered) = oneshot::channel();
        let body = serde_json::from_slice(&body).unwrap();
        let _ = to_test.send(Sent {
            body,
            deadline,
            reply,
        });
        Box::pin(async move {
            answered
                .await
                .unwrap_or(Err(PushRulesError::Transport(TransportFailure::Closed)))
        })
    });
    Queue {
        coalescer: EvaluateCoalescer::new(settings, send),
        sent,
    }
}

impl Queue {
    /// `evaluate` of an event naming `recipients` recipients, with a deadline 10 s away.
    fn call(&self, event: &str, recipients: usize) -> JoinHandle<Answer> {
        self.call_within(event, recipients, Duration::from_secs(10))
    }

    fn call_within(&self, event: &str, recipients: usize, within: Duration) -> JoinHandle<Answer> {
        let json = entry(event, recipients, json!({})).to_string().into_bytes();
        self.call_json(json, recipients, within)
    }

    fn call_json(&self, json: Vec<u8>, recipients: usize, within: Duration) -> JoinHandle<Answer> {
        let coalescer = Arc::clone(&self.coalescer);
        let deadline = Instant::now() + within;
        tokio::spawn(async move { coalescer.evaluate(json, recipients, deadline).await })
    }

    async fn next(&mut self) -> Sent {
        timeout(Duration::from_secs(5), self.sent.recv())
            .await
            .expect("a message within 5 s")
            .expect("the queue open")
    }

    /// Lets the spawned calls run, then checks that none of them sent anything.
    async fn nothing_sent(&mut self) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(self.sent.try_recv().is_err(), "a message was sent");
    }
}

fn entry(event: &str, recipients: usize, content: Value) -> Value {
    let recipients: Vec<Value> = (0..recipients)
        .map(|n| json!({"user_id": format!("@u{n}:example.org")}))
        .collect();
    json!({"event": {"event_id": event, "content": content}, "room": {}, "recipients": recipients})
}

fn evaluated(event: &str) -> Value {
    json!({"notify": {}, "evaluated": 0, "event": event})
}

fn results(events: &[String]) -> Value {
    let results: Vec<Value> = events
        .iter()
        .map(|e| json!({"ok": true, "body": evaluated(e)}))
        .collect();
    json!({ "results": results })
}

fn refusal(kind: ErrorKind) -> PushRulesError {
    PushRulesError::Worker(ErrorBody {
        kind,
        errcode: "M_UNKNOWN".into(),
        error: "refused".into(),
        status: 400,
    })
}

async fn error_of(call: JoinHandle<Answer>) -> PushRulesError {
    call.await.unwrap().expect_err("an error")
}

async fn body_of(call: JoinHandle<Answer>) -> Value {
    serde_json::from_str(call.await.unwrap().expect("an answer").get()).unwrap()
}

/// One call out alone, answered by nothing yet: what makes later calls wait.
async fn one_out(queue: &mut Queue) -> (JoinHandle<Answer>, Sent) {
    let first = queue.call("$first", 1);
    let sent = queue.next().await;
    assert_eq!(sent.events(), (vec!["$first".to_owned()], false));
    (first, sent)
}
