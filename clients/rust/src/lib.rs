//! A client for the matrix-push-worker pool: Matrix push rules, pushers, push evaluation and
//! delivery, served by workers over RabbitMQ (AMQP 0-9-1) as the RPC contract says
//! (`contract/`, docs/rpc-contract.md). The same client as the TypeScript `PushRulesClient` and
//! the Python `matrix_push_worker`, in tokio.
//!
//! ```no_run
//! use matrix_push_worker_client::{ClientOptions, NewPushRule, PushAction, PushRulesClient};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let client = PushRulesClient::new(ClientOptions {
//!     publisher_user_id: Some("homeserver".into()),
//!     ..ClientOptions::new("amqp://homeserver:secret@rabbit-a,amqp://homeserver:secret@rabbit-b")
//! })?;
//! let rule = NewPushRule {
//!     pattern: Some("pizza".into()),
//!     actions: vec![PushAction::Notify],
//!     ..NewPushRule::default()
//! };
//! client
//!     .set_push_rule("@alice:example.org", "global", "content", "pizza", &rule)
//!     .message_id("write-1")
//!     .await?;
//! match client.get_push_rules("@alice:example.org").await {
//!     Ok(rules) => println!("{} content rules", rules.global.content.len()),
//!     // What to answer the Matrix client: `error.status()` with this body.
//!     Err(error) => println!("{}", serde_json::to_string(&error.to_matrix_body())?),
//! }
//! client.close().await;
//! # Ok(())
//! # }
//! ```

mod broker;
mod broker_urls;
mod calls;
mod client;
mod error;
mod evaluate_calls;
mod evaluate_coalescer;
mod evaluate_wire;
mod evaluation;
mod json;
mod notify;
mod notify_calls;
mod options;
mod push_action;
mod push_condition;
mod push_rules;
mod pushers;
mod rpc;
mod session;

pub use broker_urls::InvalidOptions;
pub use calls::{CallFuture, DeletePushers, Read, ReplyBody, SetPushRule, Write};
pub use client::PushRulesClient;
pub use error::{ErrorBody, ErrorKind, MatrixErrorBody, PushRulesError, TransportFailure};
pub use evaluate_calls::{Evaluate, EvaluateMany, MAX_BATCH_BYTES, MAX_BATCH_EVENTS};
pub use evaluate_coalescer::EvaluateCoalescing;
pub use evaluate_wire::GROUP_RECIPIENTS_FROM;
pub use evaluation::{
    EvaluateEvent, Evaluation, Event, Recipient, Recipients, RecipientsOfServer, Room,
};
pub use json::JsonObject;
pub use notify::{Counts, Notification, NotifyRecipient, NotifyReply, Priority};
pub use notify_calls::{Notify, NotifyWithReply};
pub use options::{
    ClientOptions, DEFAULT_DELIVER_QUEUE, DEFAULT_EVALUATE_QUEUE, DEFAULT_QUEUE,
    DEFAULT_READ_QUEUE, DEFAULT_TIMEOUT,
};
pub use push_action::PushAction;
pub use push_condition::PushCondition;
pub use push_rules::{
    NewPushRule, PushRule, PushRuleActions, PushRuleEnabled, PushRules, RuleKind, Ruleset,
};
pub use pushers::{DeletedPushers, Pusher, PusherSelector, PusherSetAction, Pushers};
pub use rpc::WIRE_VERSION;
