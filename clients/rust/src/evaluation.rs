//! `evaluate`'s inputs and answer (docs/rpc-contract.md, evaluate).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::json::{present, JsonObject};
use crate::push_action::PushAction;

/// The event in client format, as the homeserver persisted it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    #[serde(rename = "type")]
    pub event_type: String,
    pub room_id: String,
    pub sender: String,
    pub content: JsonObject,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub state_key: Option<String>,
    /// Every other key (`event_id`, `origin_server_ts`, `unsigned`, …): sent, and conditions can
    /// match them.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Event {
    pub fn new(
        event_type: impl Into<String>,
        room_id: impl Into<String>,
        sender: impl Into<String>,
        content: JsonObject,
    ) -> Self {
        Self {
            event_type: event_type.into(),
            room_id: room_id.into(),
            sender: sender.into(),
            content,
            state_key: None,
            extra: JsonObject::new(),
        }
    }
}

/// What the conditions read of the room.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Room {
    /// What `room_member_count` compares with.
    pub member_count: u64,
    /// `None`: no `sender_notification_permission` condition matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_power_level: Option<i64>,
    /// The room's power levels `notifications`: `room` counts as 50 when absent.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub notification_power_levels: Option<BTreeMap<String, i64>>,
    /// Sent as given; the workers ignore what they do not know.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A local member the event may notify.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recipient {
    pub user_id: String,
    /// What `contains_display_name` matches: the member's display name in the room.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub display_name: Option<String>,
    /// Sent as given in the plain list (the grouped form has no place for them).
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Recipient {
    pub fn new(user_id: impl Into<String>) -> Self {
        Self {
            user_id: user_id.into(),
            display_name: None,
            extra: JsonObject::new(),
        }
    }

    pub fn with_display_name(user_id: impl Into<String>, display_name: impl Into<String>) -> Self {
        Self {
            display_name: Some(display_name.into()),
            ..Self::new(user_id)
        }
    }
}

/// One group of the grouped form: the recipients `@<localpart>:<server>`, in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecipientsOfServer {
    pub server: String,
    pub localparts: Vec<String>,
    /// One entry per localpart (`None`: no display name), or none at all.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub display_names: Option<Vec<Option<String>>>,
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The recipients of one `evaluate`: a list (sent grouped by server from 100 recipients), or
/// already grouped by server (sent as given, however few).
#[derive(Clone, Copy, Debug)]
pub enum Recipients<'a> {
    List(&'a [Recipient]),
    ByServer(&'a [RecipientsOfServer]),
}

impl<'a> From<&'a [Recipient]> for Recipients<'a> {
    fn from(list: &'a [Recipient]) -> Self {
        Self::List(list)
    }
}

impl<'a> From<&'a Vec<Recipient>> for Recipients<'a> {
    fn from(list: &'a Vec<Recipient>) -> Self {
        Self::List(list)
    }
}

impl<'a, const N: usize> From<&'a [Recipient; N]> for Recipients<'a> {
    fn from(list: &'a [Recipient; N]) -> Self {
        Self::List(list)
    }
}

impl<'a> From<&'a [RecipientsOfServer]> for Recipients<'a> {
    fn from(groups: &'a [RecipientsOfServer]) -> Self {
        Self::ByServer(groups)
    }
}

impl<'a, const N: usize> From<&'a [RecipientsOfServer; N]> for Recipients<'a> {
    fn from(groups: &'a [RecipientsOfServer; N]) -> Self {
        Self::ByServer(groups)
    }
}

impl<'a> From<&'a Vec<RecipientsOfServer>> for Recipients<'a> {
    fn from(groups: &'a Vec<RecipientsOfServer>) -> Self {
        Self::ByServer(groups)
    }
}

/// One event of `evaluate_many`: the arguments of one `evaluate` call.
#[derive(Clone, Copy, Debug)]
pub struct EvaluateEvent<'a> {
    pub event: &'a Event,
    pub room: &'a Room,
    pub recipients: Recipients<'a>,
    /// Ask for `rule_ids`.
    pub explain: bool,
}

/// `evaluate`'s answer, in the contract's default form whichever form the worker answered in.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// The notified recipients only, with the actions of their matched rule (minus `dont_notify`
    /// and `coalesce`).
    pub notify: HashMap<String, Vec<PushAction>>,
    /// How many recipients were evaluated (the sender among them, never notified).
    pub evaluated: u64,
    /// With `explain`: every recipient's matched rule, `None` when none matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_ids: Option<HashMap<String, Option<String>>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_keeps_every_key_for_the_conditions_to_match() {
        let wire = json!({
            "type": "m.room.message", "room_id": "!r:x", "sender": "@s:x",
            "content": {"body": "hi"}, "event_id": "$e", "unsigned": {"age": 1},
        });
        let event: Event = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(event.extra["event_id"], "$e");
        assert_eq!(serde_json::to_value(&event).unwrap(), wire);
    }

    #[test]
    fn a_recipient_display_name_is_absent_or_a_string() {
        let named: Recipient =
            serde_json::from_value(json!({"user_id": "@a:x", "display_name": "A"})).unwrap();
        assert_eq!(named, Recipient::with_display_name("@a:x", "A"));
        let null = json!({"user_id": "@a:x", "display_name": null});
        assert!(serde_json::from_value::<Recipient>(null).is_err());
    }
}
