//! The calls the client's methods return: set their options, then `.await` them. The reads and
//! writes of push rules and pushers here; `evaluate` and `notify` in their own files.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::client::PushRulesClient;
use crate::error::{PushRulesError, TransportFailure};
use crate::json::JsonObject;
use crate::notify::NotifyReply;
use crate::push_rules::{PushRule, PushRuleActions, PushRuleEnabled, PushRules};
use crate::pushers::{DeletedPushers, Pushers};
use crate::rpc::{Outgoing, Target};

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

pub(crate) fn bad_reply() -> PushRulesError {
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

pub(crate) fn fresh_id() -> String {
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
