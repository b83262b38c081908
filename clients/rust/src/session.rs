//! One open connection to one node: its confirm channel, the direct reply-to consumer, the calls
//! waiting for a reply, and the count of the read queue's consumers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, Event};
use tokio::sync::{oneshot, watch};
use tracing::{debug, warn};

use crate::broker_urls::BrokerAddress;
use crate::error::TransportFailure;

/// Where replies come: RabbitMQ's direct reply-to, consumed on the publishing channel.
pub(crate) const REPLY_QUEUE: &str = "amq.rabbitmq.reply-to";

/// A reply's bytes, or why none will come.
pub(crate) type Answer = Result<Vec<u8>, TransportFailure>;

/// How a publish ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Published {
    Confirmed,
    /// `mandatory`: no queue took it.
    Returned,
    /// Nacked: in no queue.
    Refused,
    /// The connection or the channel went.
    Lost,
}

pub(crate) struct SessionSettings {
    pub connection_name: String,
    pub connect_timeout: Duration,
    pub read_queue: Option<String>,
    pub read_probe_interval: Duration,
}

pub(crate) struct Session {
    pub label: String,
    connection: Arc<Connection>,
    channel: Channel,
    pending: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    read_queue_served: AtomicBool,
    lost: watch::Sender<bool>,
}

impl Session {
    /// Connects to `address` and sets the session up, within `settings.connect_timeout`.
    pub async fn open(
        address: &BrokerAddress,
        settings: &SessionSettings,
    ) -> Result<Arc<Self>, String> {
        let properties = ConnectionProperties::default()
            .with_connection_name(settings.connection_name.as_str().into());
        let connecting = Connection::connect_uri(address.uri.clone(), properties);
        let connection = tokio::time::timeout(settings.connect_timeout, connecting)
            .await
            .map_err(|_| format!("no answer within {:?}", settings.connect_timeout))?
            .map_err(|error| error.to_string())?;
        let connection = Arc::new(connection);
        let set_up = Self::set_up(connection.clone(), address.label.clone(), settings);
        match tokio::time::timeout(settings.connect_timeout, set_up).await {
            Ok(Ok(session)) => Ok(session),
            failed => {
                close_within(&connection, settings.connect_timeout).await;
                Err(match failed {
                    Ok(Err(error)) => error,
                    _ => format!("set-up took longer than {:?}", settings.connect_timeout),
                })
            }
        }
    }

    async fn set_up(
        connection: Arc<Connection>,
        label: String,
        settings: &SessionSettings,
    ) -> Result<Arc<Self>, String> {
        let channel = connection
            .create_channel()
            .await
            .map_err(|e| e.to_string())?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        let session = Arc::new(Self {
            label,
            connection,
            channel,
            pending: Mutex::new(HashMap::new()),
            read_queue_served: AtomicBool::new(false),
            lost: watch::channel(false).0,
        });
        // Consumed with no-ack on the publishing channel before anything is published, as direct
        // reply-to wants.
        let consumer = session
            .channel
            .basic_consume(
                REPLY_QUEUE.into(),
                "".into(),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(take_replies(Arc::downgrade(&session), consumer));
        tokio::spawn(watch_connection(Arc::downgrade(&session)));
        if let Some(read_queue) = &settings.read_queue {
            let mut probe = None;
            probe = session.count_read_consumers(read_queue, probe).await;
            tokio::spawn(watch_read_queue(
                Arc::downgrade(&session),
                read_queue.clone(),
                settings.read_probe_interval,
                probe,
            ));
        }
        Ok(session)
    }

    pub fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    /// Resolves once the session is lost.
    pub async fn until_lost(&self) {
        let mut lost = self.lost.subscribe();
        // An error: the sender is gone with the session, lost too.
        let _ = lost.wait_for(|lost| *lost).await;
    }

    /// This connection can no longer serve: every pending call fails with `connection-lost`
    /// (their replies would come to this connection), and the broker connects again.
    pub fn lose(&self, reason: &str) {
        if self.lost.send_replace(true) {
            return;
        }
        warn!(broker = %self.label, "lost RabbitMQ: {reason}");
        self.fail_all(TransportFailure::ConnectionLost);
    }

    /// Fails every pending call with `reason`, and nothing more is sent on this session.
    pub fn retire(&self, reason: TransportFailure) {
        self.fail_all(reason);
        self.lost.send_replace(true);
    }

    fn fail_all(&self, reason: TransportFailure) {
        let pending = std::mem::take(&mut *self.lock_pending());
        for (_, waiter) in pending {
            let _ = waiter.send(Err(reason));
        }
    }

    pub async fn close(&self, within: Duration) {
        close_within(&self.connection, within).await;
    }

    pub fn read_queue_served(&self) -> bool {
        self.read_queue_served.load(Ordering::Relaxed)
    }

    pub fn set_read_queue_served(&self, served: bool) {
        self.read_queue_served.store(served, Ordering::Relaxed);
    }

    /// Waits for the reply with this correlation ID; `None` when the session is lost already.
    pub fn expect_reply(self: &Arc<Self>, correlation_id: &str) -> Option<PendingReply> {
        let (sender, receiver) = oneshot::channel();
        let mut pending = self.lock_pending();
        // Checked under the lock `fail_all` takes: a call registered after it would wait in vain.
        if self.is_lost() {
            return None;
        }
        pending.insert(correlation_id.to_owned(), sender);
        Some(PendingReply {
            session: self.clone(),
            correlation_id: correlation_id.to_owned(),
            receiver,
        })
    }

    /// Publishes through the default exchange, `mandatory`, and waits for the broker's confirm.
    /// In a task of its own: a caller that stops waiting leaves no confirm behind.
    pub async fn publish(
        self: &Arc<Self>,
        queue: &str,
        body: Arc<Vec<u8>>,
        properties: BasicProperties,
    ) -> Published {
        if self.is_lost() {
            return Published::Lost;
        }
        let session = self.clone();
        let queue = queue.to_owned();
        let publishing = tokio::spawn(async move {
            let options = BasicPublishOptions {
                mandatory: true,
                immediate: false,
            };
            let sent = session
                .channel
                .basic_publish("".into(), queue.as_str().into(), options, &body, properties)
                .await;
            let confirm = match sent {
                Ok(confirm) => confirm,
                Err(error) => {
                    // The channel is closed and its close has not been seen yet: drop the
                    // connection now, so the next call connects instead of failing too.
                    session.lose(&format!("publishing failed: {error}"));
                    return Published::Lost;
                }
            };
            match confirm.await {
                Ok(Confirmation::Ack(None) | Confirmation::NotRequested) => Published::Confirmed,
                Ok(Confirmation::Ack(Some(_))) => Published::Returned,
                Ok(Confirmation::Nack(_)) => Published::Refused,
                Err(error) => {
                    session.lose(&format!("no confirm: {error}"));
                    Published::Lost
                }
            }
        });
        publishing.await.unwrap_or(Published::Lost)
    }

    fn deliver(&self, correlation_id: &str, body: Vec<u8>) {
        // A second reply for the same call (a redelivered request answered again) finds nothing.
        let waiter = self.lock_pending().remove(correlation_id);
        if let Some(waiter) = waiter {
            let _ = waiter.send(Ok(body));
        }
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Answer>>> {
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts the read queue's consumers on a channel of its own (a queue that does not exist
    /// closes the channel that asks); returns the channel to ask on next time.
    async fn count_read_consumers(
        &self,
        read_queue: &str,
        probe: Option<Channel>,
    ) -> Option<Channel> {
        let probe = match probe.filter(|channel| channel.status().connected()) {
            Some(channel) => channel,
            None => match self.connection.create_channel().await {
                Ok(channel) => channel,
                Err(_) => {
                    self.set_read_queue_served(false);
                    return None;
                }
            },
        };
        let options = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        match probe
            .queue_declare(read_queue.into(), options, FieldTable::default())
            .await
        {
            Ok(queue) => {
                self.set_read_queue_served(queue.consumer_count() > 0);
                Some(probe)
            }
            Err(error) => {
                debug!(broker = %self.label, "the read queue is not served: {error}");
                self.set_read_queue_served(false);
                None
            }
        }
    }
}

/// A call's registration for its reply; dropping it forgets the call.
pub(crate) struct PendingReply {
    session: Arc<Session>,
    correlation_id: String,
    receiver: oneshot::Receiver<Answer>,
}

impl PendingReply {
    pub async fn answer(&mut self) -> Answer {
        (&mut self.receiver)
            .await
            .unwrap_or(Err(TransportFailure::ConnectionLost))
    }
}

impl Drop for PendingReply {
    fn drop(&mut self) {
        self.session.lock_pending().remove(&self.correlation_id);
    }
}

async fn take_replies(session: Weak<Session>, mut consumer: lapin::Consumer) {
    let reason = loop {
        match consumer.next().await {
            Some(Ok(delivery)) => {
                let Some(session) = session.upgrade() else {
                    return;
                };
                if let Some(id) = delivery.properties.correlation_id() {
                    session.deliver(id.as_str(), delivery.data);
                }
            }
            Some(Err(error)) => break format!("the reply consumer failed: {error}"),
            None => {
                break "the reply consumer was cancelled (the channel or connection closed)"
                    .to_owned()
            }
        }
    };
    if let Some(session) = session.upgrade() {
        session.lose(&reason);
    }
}

/// A connection error (a missed heartbeat, a closed socket) fails the session even while no reply
/// is awaited. A channel's own error (the read probe's) leaves the connection connected.
async fn watch_connection(session: Weak<Session>) {
    let (mut events, lost) = match session.upgrade() {
        Some(live) => (live.connection.events_listener(), live.lost.subscribe()),
        None => return,
    };
    let mut lost = lost;
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Event::Error(error)) => {
                    let Some(live) = session.upgrade() else { return };
                    if !live.connection.status().connected() {
                        live.lose(&format!("the connection failed: {error}"));
                        return;
                    }
                }
                Some(_) => {}
                None => return,
            },
            _ = lost.wait_for(|lost| *lost) => return,
        }
    }
}

/// Reads go to the read queue only while some worker consumes it: a read never waits in a queue
/// nobody reads.
async fn watch_read_queue(
    session: Weak<Session>,
    read_queue: String,
    every: Duration,
    mut probe: Option<Channel>,
) {
    loop {
        tokio::time::sleep(every).await;
        let Some(live) = session.upgrade() else {
            return;
        };
        if live.is_lost() {
            return;
        }
        probe = live.count_read_consumers(&read_queue, probe).await;
    }
}

async fn close_within(connection: &Connection, within: Duration) {
    let _ =
        tokio::time::timeout(within, connection.close(200, "closed by the client".into())).await;
}
