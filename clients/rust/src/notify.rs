//! `notify`'s message (docs/delivery.md, the notify message on the wire) and its reply.

use serde::{Deserialize, Serialize};

use crate::json::{present, JsonObject};
use crate::push_action::PushAction;

/// The notification of one event (or, without `event_id`, a badge update). Every field optional.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub event_id: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub room_id: Option<String>,
    #[serde(
        rename = "type",
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub event_type: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub sender: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub sender_display_name: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub room_name: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub room_alias: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub content: Option<JsonObject>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub prio: Option<Priority>,
    /// Sent as given; the workers ignore what they do not know.
    #[serde(flatten)]
    pub extra: JsonObject,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    High,
    Low,
}

/// One recipient of a notification.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NotifyRecipient {
    pub user_id: String,
    /// The actions of the rule that matched; `None`: `["notify"]`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub actions: Option<Vec<PushAction>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub counts: Option<Counts>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub user_is_target: Option<bool>,
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl NotifyRecipient {
    pub fn new(user_id: impl Into<String>) -> Self {
        Self {
            user_id: user_id.into(),
            actions: None,
            counts: None,
            user_is_target: None,
            extra: JsonObject::new(),
        }
    }
}

/// The badge counts pushed with a notification.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub unread: Option<u64>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub missed_calls: Option<u64>,
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The reply to a `notify` that asked for one: what it was taken in for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NotifyReply {
    pub recipients: u64,
    pub devices: u64,
    /// Parts not taken in yet when the workers' reply wait ran out (still delivered later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<u64>,
    #[serde(flatten)]
    pub extra: JsonObject,
}
