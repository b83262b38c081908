//! The calls the client's methods return: set their options, then `.await` them.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use futures_util::future::join_all;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::client::PushRulesClient;
use crate::error::{ErrorKind, PushRulesError, TransportFailure};
use crate::evaluate_wire::{batch, decode, PreparedEntry};
use crate::evaluation::{EvaluateEvent, Evaluation, Event, Recipients, Room};
use crate::json::JsonObject;
use crate::notify::NotifyReply;
use crate::push_rules::{PushRule, PushRuleActions, PushRuleEnabled, PushRules};
use crate::pushers::{DeletedPushers, Pushers};
use crate::rpc::{Envelope, Outgoing, Target};

/// What awaiting a call gives: a boxed future, `Send` and `'static` (it can be spawned).
pub type CallFuture<T> = Pin<Box<dyn Future<Output = Result<T, PushRulesError>> + Send>>;

mod sealed {
    pub trait Sealed {}
}

/// A success body a call resolves with.
pub trait ReplyBody: sealed::Sealed + Sized + Send + 'static {
    #[doc(hidden)]
    fn from_body(body: &RawValue) -> Option<Self>;
}

impl sealed::Sealed for () {}

/// A write's `{}`.
impl ReplyBody for () {
    fn from_body(_: &RawValue) -> Option<Self> {
        Some(())
    }
}

macro_rules! json_bodies {
    ($($body:ty),*) => {$(
        impl sealed::Sealed for $body {}
        impl ReplyBody for $body {
            fn from_body(body: &RawValue) -> Option<Self> {
                serde_json::from_str(body.get()).ok()
            }
        }
    )*};
}

json_bodies!(
    PushRules,
    PushRule,
    PushRuleActions,
    PushRuleEnabled,
    Pushers,
    DeletedPushers,
    NotifyReply
);

fn bad_reply() -> PushRulesError {
    PushRulesError::Transport(TransportFailure::BadReply)
}

/// The request body of an op: `{"op", "user_id", …}`.
pub(crate) fn request(op: &str, user_id: &str) -> JsonObject {
    let mut body = JsonObject::new();
    body.insert("op".into(), op.into());
    body.insert("user_id".into(), user_id.into());
    body
}

/// Adds `value` under `key`; a value that cannot be JSON fails the call when it is awaited.
pub(crate) fn with<T: Serialize + ?Sized>(
    body: Result<JsonObject, PushRulesError>,
    key: &str,
    value: &T,
) -> Result<JsonObject, PushRulesError> {
    let mut body = body?;
    let value = serde_json::to_value(value).map_err(|e| PushRulesError::unserializable(&e))?;
    body.insert(key.into(), value);
    Ok(body)
}

fn encode(body: Result<JsonObject, PushRulesError>) -> Result<Vec<u8>, PushRulesError> {
    serde_json::to_vec(&body?).map_err(|e| PushRulesError::unserializable(&e))
}

/// A read-only op: sent to the read queue while a worker consumes it.
#[must_use = "a call does nothing until it is awaited"]
pub struct Read<T> {
    client: PushRulesClient,
    body: Result<JsonObject, PushRulesError>,
    timeout: Option<Duration>,
    reply: PhantomData<fn() -> T>,
}

impl<T> Read<T> {
    pub(crate) fn new(client: &PushRulesClient, body: Result<JsonObject, PushRulesError>) -> Self {
        Self {
            client: client.clone(),
            body,
            timeout: None,
            reply: PhantomData,
        }
    }

    /// This call's deadline instead of the client's.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

impl<T: ReplyBody> IntoFuture for Read<T> {
    type Output = Result<T, PushRulesError>;
    type IntoFuture = CallFuture<T>;

    fn into_future(self) -> Self::IntoFuture {
        let deadline = self.client.deadline(self.timeout);
        Box::pin(async move {
            let outgoing = Outgoing {
                body: encode(self.body)?,
                deadline,
                message_id: None,
                persistent: false,
            };
            let body = self.client.rpc().request(outgoing, Target::Read).await?;
            T::from_body(&body).ok_or_else(bad_reply)
        })
    }
}

/// A write: it carries a `message_id` (a fresh UUID unless given). After an error with a
/// [`reason`](PushRulesError::reason), send it again with the same one: it is applied at most once
/// and the retry gets the original reply.
#[must_use = "a call does nothing until it is awaited"]
pub struct Write<T> {
    client: PushRulesClient,
    body: Result<JsonObject, PushRulesError>,
    timeout: Option<Duration>,
    message_id: Option<String>,
    reply: PhantomData<fn() -> T>,
}

impl<T> Write<T> {
    pub(crate) fn new(client: &PushRulesClient, body: Result<JsonObject, PushRulesError>) -> Self {
        Self {
            client: client.clone(),
            body,
            timeout: None,
            message_id: None,
            reply: PhantomData,
        }
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The write's idempotency key: one per intended write, the same when retrying it.
    pub fn message_id(mut self, message_id: impl Into<String>) -> Self {
        self.message_id = Some(message_id.into());
        self
    }

    fn set(&mut self, key: &str, value: Value) {
        if let Ok(body) = &mut self.body {
            body.insert(key.into(), value);
        }
    }
}

impl<T: ReplyBody> IntoFuture for Write<T> {
    type Output = Result<T, PushRulesError>;
    type IntoFuture = CallFuture<T>;

    fn into_future(self) -> Self::IntoFuture {
        let deadline = self.client.deadline(self.timeout);
        Box::pin(async move {
            let outgoing = Outgoing {
                body: encode(self.body)?,
                deadline,
                message_id: Some(self.message_id.unwrap_or_else(fresh_id)),
                persistent: false,
            };
            let body = self
                .client
                .rpc()
                .request(outgoing, Target::Requests)
                .await?;
            T::from_body(&body).ok_or_else(bad_reply)
        })
    }
}

fn fresh_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// `set_push_rule`: a [`Write`] that may place the rule.
#[must_use = "a call does nothing until it is awaited"]
pub struct SetPushRule(pub(crate) Write<()>);

impl SetPushRule {
    /// Place the new rule just before this rule of its kind (a new rule goes first otherwise).
    pub fn before(mut self, rule_id: impl Into<String>) -> Self {
        self.0.set("before", Value::String(rule_id.into()));
        self
    }

    /// Place the new rule just after this rule of its kind.
    pub fn after(mut self, rule_id: impl Into<String>) -> Self {
        self.0.set("after", Value::String(rule_id.into()));
        self
    }

    pub fn timeout(self, timeout: Duration) -> Self {
        Self(self.0.timeout(timeout))
    }

    pub fn message_id(self, message_id: impl Into<String>) -> Self {
        Self(self.0.message_id(message_id))
    }
}

impl IntoFuture for SetPushRule {
    type Output = Result<(), PushRulesError>;
    type IntoFuture = CallFuture<()>;

    fn into_future(self) -> Self::IntoFuture {
        self.0.into_future()
    }
}

/// `delete_pushers`: a [`Write`] that may take e-mail pushers too.
#[must_use = "a call does nothing until it is awaited"]
pub struct DeletePushers(pub(crate) Write<DeletedPushers>);

impl DeletePushers {
    /// E-mail pushers go too (they stay otherwise).
    pub fn include_email(mut self, include: bool) -> Self {
        if include {
            self.0.set("include_email", Value::Bool(true));
        }
        self
    }

    pub fn timeout(self, timeout: Duration) -> Self {
        Self(self.0.timeout(timeout))
    }

    pub fn message_id(self, message_id: impl Into<String>) -> Self {
        Self(self.0.message_id(message_id))
    }
}

impl IntoFuture for DeletePushers {
    type Output = Result<DeletedPushers, PushRulesError>;
    type IntoFuture = CallFuture<DeletedPushers>;

    fn into_future(self) -> Self::IntoFuture {
        self.0.into_future()
    }
}

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
            send_alone(&client, &entry, deadline).await
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
        body: batch(entries.iter().map(|(_, entry)| entry)),
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

/// `notify`: resolves once the broker has confirmed the message (from then on nothing is lost).
#[must_use = "a call does nothing until it is awaited"]
pub struct Notify {
    pub(crate) client: PushRulesClient,
    pub(crate) body: Result<Vec<u8>, PushRulesError>,
    pub(crate) message_id: Option<String>,
    pub(crate) timeout: Option<Duration>,
}

impl Notify {
    /// Names this distinct message (a fresh UUID unless given): the same one again schedules
    /// nothing twice. One per message: when one event's recipients go in several messages, give
    /// each its own (the event ID and the batch's index, say).
    pub fn message_id(mut self, message_id: impl Into<String>) -> Self {
        self.message_id = Some(message_id.into());
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Wait for a worker to have secured the deliveries, and get what they were taken in for.
    pub fn with_reply(self) -> NotifyWithReply {
        NotifyWithReply(self)
    }
}

impl IntoFuture for Notify {
    type Output = Result<(), PushRulesError>;
    type IntoFuture = CallFuture<()>;

    fn into_future(self) -> Self::IntoFuture {
        let deadline = self.client.deadline(self.timeout);
        Box::pin(async move {
            let outgoing = Outgoing {
                body: self.body?,
                deadline,
                message_id: Some(self.message_id.unwrap_or_else(fresh_id)),
                persistent: true,
            };
            let queue = self.client.deliver_queue();
            self.client.rpc().publish(outgoing, queue).await
        })
    }
}

/// `notify` with a reply: `{"recipients", "devices"}` (and `pending`: parts not taken in yet).
#[must_use = "a call does nothing until it is awaited"]
pub struct NotifyWithReply(Notify);

impl NotifyWithReply {
    pub fn message_id(self, message_id: impl Into<String>) -> Self {
        Self(self.0.message_id(message_id))
    }

    pub fn timeout(self, timeout: Duration) -> Self {
        Self(self.0.timeout(timeout))
    }
}

impl IntoFuture for NotifyWithReply {
    type Output = Result<NotifyReply, PushRulesError>;
    type IntoFuture = CallFuture<NotifyReply>;

    fn into_future(self) -> Self::IntoFuture {
        let Notify {
            client,
            body,
            message_id,
            timeout,
        } = self.0;
        let deadline = client.deadline(timeout);
        Box::pin(async move {
            let outgoing = Outgoing {
                body: body?,
                deadline,
                message_id: Some(message_id.unwrap_or_else(fresh_id)),
                persistent: true,
            };
            let queue = client.deliver_queue();
            let body = client.rpc().request(outgoing, Target::Queue(queue)).await?;
            NotifyReply::from_body(&body).ok_or_else(bad_reply)
        })
    }
}
