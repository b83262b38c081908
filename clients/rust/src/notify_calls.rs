//! The `notify` calls: confirmed by the broker, or answered by a worker.

use std::future::IntoFuture;
use std::time::Duration;

use crate::calls::{bad_reply, fresh_id, CallFuture, ReplyBody};
use crate::client::PushRulesClient;
use crate::error::PushRulesError;
use crate::notify::NotifyReply;
use crate::rpc::Outgoing;
use crate::rpc::Target;

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
