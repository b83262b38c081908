//! The caller's side of the RPC contract, on one connection shared by every call.
//!
//! As the TypeScript client does it: one channel with publisher confirms for publishing, consuming
//! direct reply-to on it; `mandatory` publishes, so that a request no queue takes fails at once; a
//! per-call deadline that is also the request's `expiration`. When the connection goes, every
//! pending call fails at once with `connection-lost` and the next call connects again, to the next
//! node. Nothing is declared: the workers declare their queues.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::BasicProperties;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::time::Instant;

use crate::broker::Broker;
use crate::error::{ErrorBody, PushRulesError, TransportFailure};
use crate::session::{Published, Session, REPLY_QUEUE};

/// The wire version this client speaks (`x-push-wire-version`).
pub const WIRE_VERSION: i32 = 1;

/// Where a request goes.
#[derive(Clone, Copy)]
pub(crate) enum Target<'a> {
    /// The request queue.
    Requests,
    /// A read: the read queue while a worker consumes it, else the request queue.
    Read,
    Queue(&'a str),
}

/// A request ready to send.
pub(crate) struct Outgoing {
    pub body: Vec<u8>,
    pub deadline: Instant,
    pub message_id: Option<String>,
    /// Persistent, and no `expiration`: served however late (`notify`).
    pub persistent: bool,
}

/// A reply envelope, its body left unparsed until the caller knows its type.
#[derive(Deserialize)]
pub(crate) struct Envelope {
    ok: bool,
    #[serde(default)]
    body: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<ErrorBody>,
}

impl Envelope {
    pub fn into_result(self) -> Result<Box<RawValue>, PushRulesError> {
        match (self.ok, self.body, self.error) {
            (true, Some(body), _) => Ok(body),
            (false, _, Some(error)) => Err(PushRulesError::Worker(error)),
            _ => Err(PushRulesError::Transport(TransportFailure::BadReply)),
        }
    }
}

pub(crate) struct Rpc {
    broker: Arc<Broker>,
    queue: String,
    read_queue: Option<String>,
    publisher: Option<ShortString>,
}

impl Rpc {
    pub fn new(
        broker: Arc<Broker>,
        queue: String,
        read_queue: Option<String>,
        publisher: Option<String>,
    ) -> Self {
        Self {
            broker,
            queue,
            read_queue,
            publisher: publisher.map(|user| user.as_str().into()),
        }
    }

    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// The reply's body, or the worker's error, or why no reply came.
    pub async fn request(
        &self,
        outgoing: Outgoing,
        target: Target<'_>,
    ) -> Result<Box<RawValue>, PushRulesError> {
        check_message_id(&outgoing)?;
        let deadline = outgoing.deadline;
        let answer = tokio::time::timeout_at(deadline, self.exchange(outgoing, target))
            .await
            .unwrap_or(Err(TransportFailure::Timeout))
            .map_err(PushRulesError::Transport)?;
        serde_json::from_slice::<Envelope>(&answer)
            .map_err(|_| PushRulesError::Transport(TransportFailure::BadReply))?
            .into_result()
    }

    /// A persistent message that wants no reply, settled by the broker's confirm.
    pub async fn publish(&self, outgoing: Outgoing, queue: &str) -> Result<(), PushRulesError> {
        check_message_id(&outgoing)?;
        let deadline = outgoing.deadline;
        tokio::time::timeout_at(deadline, self.publish_only(outgoing, queue))
            .await
            .unwrap_or(Err(TransportFailure::Timeout))
            .map_err(PushRulesError::Transport)
    }

    async fn exchange(
        &self,
        outgoing: Outgoing,
        target: Target<'_>,
    ) -> Result<Vec<u8>, TransportFailure> {
        let session = self.broker.session().await?;
        let correlation_id = uuid::Uuid::new_v4().to_string();
        let mut reply = session
            .expect_reply(&correlation_id)
            .ok_or(TransportFailure::ConnectionLost)?;
        let properties = self
            .properties(&outgoing, &correlation_id)
            .with_reply_to(REPLY_QUEUE.into());
        let to_read_queue = match (target, &self.read_queue) {
            (Target::Read, Some(read_queue)) if session.read_queue_served() => Some(read_queue),
            _ => None,
        };
        let queue = match (target, to_read_queue) {
            (_, Some(read_queue)) => read_queue.as_str(),
            (Target::Queue(queue), None) => queue,
            _ => self.queue.as_str(),
        };
        let body = Arc::new(outgoing.body);
        let mut published = session
            .publish(queue, body.clone(), properties.clone())
            .await;
        if published == Published::Returned && to_read_queue.is_some() {
            // The read queue returned it (no worker declared it): the request queue serves every op.
            session.set_read_queue_served(false);
            published = session.publish(&self.queue, body, properties).await;
        }
        settle(&session, published)?;
        reply.answer().await
    }

    async fn publish_only(&self, outgoing: Outgoing, queue: &str) -> Result<(), TransportFailure> {
        let session = self.broker.session().await?;
        // Not a reply's key: it names the publish for the workers (a notify's derived ID).
        let correlation_id = uuid::Uuid::new_v4().to_string();
        let properties = self.properties(&outgoing, &correlation_id);
        let published = session
            .publish(queue, Arc::new(outgoing.body), properties)
            .await;
        settle(&session, published)
    }

    fn properties(&self, outgoing: &Outgoing, correlation_id: &str) -> BasicProperties {
        let mut headers = FieldTable::default();
        headers.insert(
            "x-push-wire-version".into(),
            AMQPValue::LongInt(WIRE_VERSION),
        );
        // In milliseconds, which the workers read as such (above 10^11): the deadline to the
        // millisecond, and a notify's publish time as the delivery docs ask.
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as u64);
        let mut properties = BasicProperties::default()
            .with_content_type("application/json".into())
            .with_correlation_id(correlation_id.into())
            .with_headers(headers)
            .with_timestamp(now_ms);
        properties = if outgoing.persistent {
            properties.with_delivery_mode(2)
        } else {
            let left = outgoing.deadline.saturating_duration_since(Instant::now());
            let left_ms = left.as_millis().max(1);
            properties
                .with_delivery_mode(1)
                .with_expiration(left_ms.to_string().as_str().into())
        };
        if let Some(message_id) = &outgoing.message_id {
            properties = properties.with_message_id(message_id.as_str().into());
        }
        if let Some(publisher) = &self.publisher {
            properties = properties.with_user_id(publisher.clone());
        }
        properties
    }
}

/// A message ID is an AMQP short string: at most 255 bytes.
fn check_message_id(outgoing: &Outgoing) -> Result<(), PushRulesError> {
    match &outgoing.message_id {
        Some(id) if id.len() > 255 => Err(PushRulesError::Invalid(
            "message_id is longer than 255 bytes (an AMQP short string).".to_owned(),
        )),
        _ => Ok(()),
    }
}

fn settle(session: &Session, published: Published) -> Result<(), TransportFailure> {
    match published {
        Published::Confirmed => Ok(()),
        Published::Returned => Err(TransportFailure::Unroutable),
        Published::Refused => {
            // The channel goes with its connection: on RabbitMQ 3.10 a channel that published to a
            // quorum queue during a leader election keeps being refused; a new one is served as
            // soon as the new leader is up. The calls pending on it fail with `connection-lost`.
            session.lose("the broker refused a request");
            Err(TransportFailure::Refused)
        }
        Published::Lost => Err(TransportFailure::ConnectionLost),
    }
}
