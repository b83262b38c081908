//! `ClientOptions`: where the workers are, and how long to wait for them.

use std::fmt;
use std::time::Duration;

use crate::evaluate_coalescer::EvaluateCoalescing;

pub const DEFAULT_QUEUE: &str = "matrix.push.rpc";
pub const DEFAULT_READ_QUEUE: &str = "matrix.push.read";
pub const DEFAULT_EVALUATE_QUEUE: &str = "matrix.push.evaluate";
pub const DEFAULT_DELIVER_QUEUE: &str = "matrix.push.deliver";
/// A call's deadline when neither the call nor the options give one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The options of a [`PushRulesClient`](crate::PushRulesClient). Start from
/// [`ClientOptions::new`] and change fields with struct update syntax.
#[derive(Clone)]
pub struct ClientOptions {
    /// The broker: one `amqp://` URL, or every node of a cluster (several entries, or one with the
    /// URLs comma-separated). One connection, to one node at a time (shuffled per process); on
    /// loss the next is tried at once.
    pub urls: Vec<String>,
    /// The broker user of the URLs, sent as each request's `user_id`: needed when the workers have
    /// trusted publishers, and for the homeserver ops (`delete_pushers`, `delete_user_data`,
    /// `notify`). RabbitMQ refuses any other value.
    pub publisher_user_id: Option<String>,
    /// The workers' request queue.
    pub queue: String,
    /// The workers' read queue: reads go there while a worker consumes it, else to `queue`.
    /// `None`: every read goes to `queue`.
    pub read_queue: Option<String>,
    pub evaluate_queue: String,
    /// The delivery queue (`notify`).
    pub deliver_queue: String,
    /// Each call's deadline unless the call gives its own; sent as the request's `expiration`.
    pub timeout: Duration,
    /// Asked of the broker (0: none). A node that stops answering is left after twice this.
    pub heartbeat_seconds: u16,
    /// One attempt at one node, handshake and set-up included.
    pub connect_timeout: Duration,
    /// How often the read queue's consumers are counted.
    pub read_probe_interval: Duration,
    /// The wait between two rounds over every node when none answered: jittered, from the first
    /// value, doubling per round up to the second.
    pub reconnect_backoff: (Duration, Duration),
    /// How `evaluate()` calls made while another is out go together in one message of the batch
    /// form (docs/client.md, "Many events in one message"). `None`: each call alone, for workers
    /// that predate the batch form.
    pub evaluate_coalescing: Option<EvaluateCoalescing>,
}

impl ClientOptions {
    /// The defaults, with the broker at `urls` (one URL, or several comma-separated).
    pub fn new(urls: impl Into<String>) -> Self {
        Self {
            urls: vec![urls.into()],
            publisher_user_id: None,
            queue: DEFAULT_QUEUE.to_owned(),
            read_queue: Some(DEFAULT_READ_QUEUE.to_owned()),
            evaluate_queue: DEFAULT_EVALUATE_QUEUE.to_owned(),
            deliver_queue: DEFAULT_DELIVER_QUEUE.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            heartbeat_seconds: 10,
            connect_timeout: Duration::from_secs(5),
            read_probe_interval: Duration::from_secs(1),
            reconnect_backoff: (Duration::from_millis(100), Duration::from_secs(1)),
            evaluate_coalescing: Some(EvaluateCoalescing::default()),
        }
    }
}

// By hand: the URLs may carry passwords.
impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOptions")
            .field("urls", &format_args!("[{} hidden]", self.urls.len()))
            .field("publisher_user_id", &self.publisher_user_id)
            .field("queue", &self.queue)
            .field("read_queue", &self.read_queue)
            .field("evaluate_queue", &self.evaluate_queue)
            .field("deliver_queue", &self.deliver_queue)
            .field("timeout", &self.timeout)
            .field("heartbeat_seconds", &self.heartbeat_seconds)
            .field("connect_timeout", &self.connect_timeout)
            .field("read_probe_interval", &self.read_probe_interval)
            .field("reconnect_backoff", &self.reconnect_backoff)
            .field("evaluate_coalescing", &self.evaluate_coalescing)
            .finish()
    }
}
