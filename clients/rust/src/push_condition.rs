//! A push rule's condition, as the Matrix spec has it (push rules, conditions).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Value};

use crate::json::JsonObject;

/// The conditions of the spec; anything else (another kind, extra keys, a value of another type) is
/// kept as it came in [`Other`](Self::Other): the workers keep and judge it.
#[derive(Clone, Debug, PartialEq)]
pub enum PushCondition {
    EventMatch {
        key: String,
        pattern: String,
    },
    /// `value`: a string, integer, boolean or null.
    EventPropertyIs {
        key: String,
        value: Value,
    },
    EventPropertyContains {
        key: String,
        value: Value,
    },
    ContainsDisplayName,
    /// `is`: `"2"`, `"==2"`, `"<2"`, `">=10"`, …
    RoomMemberCount {
        is: String,
    },
    SenderNotificationPermission {
        key: String,
    },
    Other(Value),
}

impl PushCondition {
    fn from_value(value: Value) -> Self {
        let Value::Object(object) = value else {
            return Self::Other(value);
        };
        typed(&object).unwrap_or(Self::Other(Value::Object(object)))
    }

    fn to_value(&self) -> Value {
        match self {
            Self::EventMatch { key, pattern } => {
                json!({"kind": "event_match", "key": key, "pattern": pattern})
            }
            Self::EventPropertyIs { key, value } => {
                json!({"kind": "event_property_is", "key": key, "value": value})
            }
            Self::EventPropertyContains { key, value } => {
                json!({"kind": "event_property_contains", "key": key, "value": value})
            }
            Self::ContainsDisplayName => json!({"kind": "contains_display_name"}),
            Self::RoomMemberCount { is } => json!({"kind": "room_member_count", "is": is}),
            Self::SenderNotificationPermission { key } => {
                json!({"kind": "sender_notification_permission", "key": key})
            }
            Self::Other(value) => value.clone(),
        }
    }
}

/// The typed condition when `object` is exactly one (its kind, its keys and nothing more).
fn typed(object: &JsonObject) -> Option<PushCondition> {
    let text = |key: &str| object.get(key)?.as_str().map(str::to_owned);
    let scalar = |key: &str| {
        object
            .get(key)
            .filter(|value| !value.is_array() && !value.is_object() && !value.is_f64())
            .cloned()
    };
    let only = |keys: &[&str]| {
        object.len() == keys.len() + 1 && keys.iter().all(|key| object.contains_key(*key))
    };
    let condition = match object.get("kind")?.as_str()? {
        "event_match" if only(&["key", "pattern"]) => PushCondition::EventMatch {
            key: text("key")?,
            pattern: text("pattern")?,
        },
        "event_property_is" if only(&["key", "value"]) => PushCondition::EventPropertyIs {
            key: text("key")?,
            value: scalar("value")?,
        },
        "event_property_contains" if only(&["key", "value"]) => {
            PushCondition::EventPropertyContains {
                key: text("key")?,
                value: scalar("value")?,
            }
        }
        "contains_display_name" if only(&[]) => PushCondition::ContainsDisplayName,
        "room_member_count" if only(&["is"]) => PushCondition::RoomMemberCount { is: text("is")? },
        "sender_notification_permission" if only(&["key"]) => {
            PushCondition::SenderNotificationPermission { key: text("key")? }
        }
        _ => return None,
    };
    Some(condition)
}

impl Serialize for PushCondition {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for PushCondition {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Self::from_value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_conditions_are_typed_and_everything_round_trips() {
        let typed = [
            json!({"kind": "event_match", "key": "content.body", "pattern": "pizza"}),
            json!({"kind": "event_property_is", "key": "content.is_falling_back", "value": false}),
            json!({"kind": "event_property_is", "key": "state_key", "value": null}),
            json!({"kind": "event_property_contains", "key": "content.m\\.mentions.user_ids", "value": "@a:x"}),
            json!({"kind": "contains_display_name"}),
            json!({"kind": "room_member_count", "is": "2"}),
            json!({"kind": "sender_notification_permission", "key": "room"}),
        ];
        let kept = [
            json!({"kind": "event_match", "key": "content.body"}),
            json!({"kind": "event_match", "key": "a", "pattern": "b", "extra": true}),
            json!({"kind": "event_property_is", "key": "a", "value": [1]}),
            json!({"kind": "event_property_is", "key": "a", "value": 1.5}),
            json!({"kind": "room_member_count", "is": 2}),
            json!({"kind": "org.example.unknown"}),
            json!({"no_kind": 1}),
            json!("event_match"),
        ];
        for wire in typed.iter().chain(kept.iter()) {
            let condition: PushCondition = serde_json::from_value(wire.clone()).unwrap();
            let is_other = matches!(condition, PushCondition::Other(_));
            assert_eq!(is_other, kept.contains(wire), "{wire}");
            assert_eq!(&serde_json::to_value(&condition).unwrap(), wire);
        }
    }
}
