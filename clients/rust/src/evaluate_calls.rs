//! The `evaluate` calls: one event, or many in messages of the batch form.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::Duration;

use futures_util::future::join_all;

use crate::calls::{bad_reply, CallFuture};
use crate::client::PushRulesClient;
use crate::error::{ErrorKind, PushRulesError};
use crate::evaluate_wire::{batch_form, decode, PreparedEntry};
use crate::evaluation::{EvaluateEvent, Evaluation, Event, Recipients, Room};
use crate::rpc::{Envelope, Outgoing, Target};

/// `evaluate`: which recipients an event notifies, with which actions, in the default form.
#[must_use = "a call does nothing until it is awaited"]
pub struct Evaluate<'a> {
    pub(crate) client: PushRulesClient,
    pub(crate) event: &'a Event,
    pub(crate) room: &'a Room,
    pub(crate) recipients: Recipients<'a>,
    pub(crate) explain: bool,
    pub(crate) timeout: Option<Duration>,
}

impl Evaluate<'_> {
    /// Ask for `rule_ids`: every recipient's matched rule.
    pub fn explain(mut self, explain: bool) -> Self {
        self.explain = explain;
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

impl IntoFuture for Evaluate<'_> {
    type Output = Result<Evaluation, PushRulesError>;
    type IntoFuture = CallFuture<Evaluation>;

    fn into_future(self) -> Self::IntoFuture {
        let deadline = self.client.deadline(self.timeout);
        // Serialized now: the future borrows nothing.
        let prepared = PreparedEntry::new(self.event, self.room, self.recipients, self.explain)
            .map_err(|e| PushRulesError::unserializable(&e));
        let client = self.client;
        Box::pin(async move {
            let entry = prepared?;
            let Some(coalescer) = client.coalescer() else {
                return send_alone(&client, &entry, deadline).await;
            };
            let PreparedEntry { json, order } = entry;
            let body = coalescer.evaluate(json, order.len(), deadline).await?;
            decode(&body, &order).ok_or_else(bad_reply)
        })
    }
}

async fn send_alone(
    client: &PushRulesClient,
    entry: &PreparedEntry,
    deadline: tokio::time::Instant,
) -> Result<Evaluation, PushRulesError> {
    let outgoing = Outgoing {
        body: entry.single(),
        deadline,
        message_id: None,
        persistent: false,
    };
    let queue = client.evaluate_queue();
    let body = client.rpc().request(outgoing, Target::Queue(queue)).await?;
    decode(&body, &entry.order).ok_or_else(bad_reply)
}

/// Events per message of `evaluate_many` (the workers take up to `evaluate.maxBatchEvents`, 256).
pub const MAX_BATCH_EVENTS: usize = 64;
/// Bytes of events' JSON per message of `evaluate_many` (the workers take up to 4 MiB).
pub const MAX_BATCH_BYTES: usize = 1 << 20;

/// `evaluate_many`: several events in messages of the batch form, sent at once.
#[must_use = "a call does nothing until it is awaited"]
pub struct EvaluateMany<'a> {
    pub(crate) client: PushRulesClient,
    pub(crate) events: &'a [EvaluateEvent<'a>],
    pub(crate) timeout: Option<Duration>,
}

impl EvaluateMany<'_> {
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

type Answers = Vec<Result<Evaluation, PushRulesError>>;

impl IntoFuture for EvaluateMany<'_> {
    /// One answer per event, in order: what `evaluate` gives, or that event's own error. Never
    /// fails as a whole.
    type Output = Answers;
    type IntoFuture = Pin<Box<dyn Future<Output = Answers> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        let deadline = self.client.deadline(self.timeout);
        let prepared: Vec<Result<PreparedEntry, PushRulesError>> = self
            .events
            .iter()
            .map(|each| {
                PreparedEntry::new(each.event, each.room, each.recipients, each.explain)
                    .map_err(|e| PushRulesError::unserializable(&e))
            })
            .collect();
        let client = self.client;
        Box::pin(async move {
            let mut answers: Answers = Vec::with_capacity(prepared.len());
            let mut messages: Vec<Vec<(usize, PreparedEntry)>> = Vec::new();
            let mut size = 0usize;
            for (index, entry) in prepared.into_iter().enumerate() {
                match entry {
                    Err(error) => answers.push(Err(error)),
                    Ok(entry) => {
                        answers.push(Err(bad_reply()));
                        let full = messages.last().is_none_or(|last| {
                            last.len() >= MAX_BATCH_EVENTS
                                || size + entry.json.len() > MAX_BATCH_BYTES
                        });
                        if full {
                            messages.push(Vec::new());
                            size = 0;
                        }
                        size += entry.json.len();
                        messages
                            .last_mut()
                            .expect("pushed above")
                            .push((index, entry));
                    }
                }
            }
            let results = join_all(
                messages
                    .iter()
                    .map(|message| send_batch(&client, message, deadline)),
            )
            .await;
            for (message, result) in messages.iter().zip(results) {
                for ((index, _), answer) in message.iter().zip(result) {
                    answers[*index] = answer;
                }
            }
            answers
        })
    }
}

/// One message of the batch form: one answer per entry. A batch refused as a whole for its size or
/// its JSON is sent again, each event alone, so that only an event that fails alone fails.
async fn send_batch(
    client: &PushRulesClient,
    entries: &[(usize, PreparedEntry)],
    deadline: tokio::time::Instant,
) -> Answers {
    let outgoing = Outgoing {
        body: batch_form(entries.iter().map(|(_, entry)| entry.json.as_slice())),
        deadline,
        message_id: None,
        persistent: false,
    };
    let queue = client.evaluate_queue();
    match client.rpc().request(outgoing, Target::Queue(queue)).await {
        Ok(body) => {
            #[derive(serde::Deserialize)]
            struct Results {
                results: Vec<Envelope>,
            }
            let Ok(Results { results }) = serde_json::from_str::<Results>(body.get()) else {
                return entries.iter().map(|_| Err(bad_reply())).collect();
            };
            let mut results = results.into_iter();
            entries
                .iter()
                .map(|(_, entry)| {
                    let body = results.next().ok_or_else(bad_reply)?.into_result()?;
                    decode(&body, &entry.order).ok_or_else(bad_reply)
                })
                .collect()
        }
        Err(PushRulesError::Worker(error))
            if entries.len() > 1
                && matches!(error.kind, ErrorKind::TooLarge | ErrorKind::BadJson) =>
        {
            join_all(
                entries
                    .iter()
                    .map(|(_, entry)| send_alone(client, entry, deadline)),
            )
            .await
        }
        Err(error) => entries.iter().map(|_| Err(error.clone())).collect(),
    }
}
