//! A push rule's action, as the Matrix spec has it (push rules, actions).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::json::JsonObject;

/// `"notify"`, the legacy `"dont_notify"` and `"coalesce"`, or a tweak `{"set_tweak": name,
/// "value": value}`. Anything else is kept as it came ([`Other`](Self::Other)): rules hold what was
/// stored, and the workers judge what they take.
#[derive(Clone, Debug, PartialEq)]
pub enum PushAction {
    Notify,
    DontNotify,
    Coalesce,
    /// `value` absent (`None`) is what the spec says for a `highlight` tweak: true.
    SetTweak {
        name: String,
        value: Option<Value>,
    },
    Other(Value),
}

impl PushAction {
    /// `{"set_tweak": "sound", "value": sound}`.
    pub fn sound(sound: impl Into<String>) -> Self {
        Self::SetTweak {
            name: "sound".to_owned(),
            value: Some(Value::String(sound.into())),
        }
    }

    /// `{"set_tweak": "highlight", "value": highlight}`.
    pub fn highlight(highlight: bool) -> Self {
        Self::SetTweak {
            name: "highlight".to_owned(),
            value: Some(Value::Bool(highlight)),
        }
    }

    fn from_value(value: Value) -> Self {
        match value {
            Value::String(word) => match word.as_str() {
                "notify" => Self::Notify,
                "dont_notify" => Self::DontNotify,
                "coalesce" => Self::Coalesce,
                _ => Self::Other(Value::String(word)),
            },
            Value::Object(object) if is_tweak(&object) => {
                let mut object = object;
                let value = object.remove("value");
                match object.remove("set_tweak") {
                    Some(Value::String(name)) => Self::SetTweak { name, value },
                    _ => unreachable!("is_tweak checked set_tweak"),
                }
            }
            other => Self::Other(other),
        }
    }
}

/// A tweak this type can hold exactly: `set_tweak` a string, nothing but `value` beside it.
fn is_tweak(object: &JsonObject) -> bool {
    matches!(object.get("set_tweak"), Some(Value::String(_)))
        && object
            .keys()
            .all(|key| key == "set_tweak" || key == "value")
}

impl Serialize for PushAction {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Self::Notify => serializer.serialize_str("notify"),
            Self::DontNotify => serializer.serialize_str("dont_notify"),
            Self::Coalesce => serializer.serialize_str("coalesce"),
            Self::SetTweak { name, value } => {
                let mut map = serializer.serialize_map(Some(1 + usize::from(value.is_some())))?;
                map.serialize_entry("set_tweak", name)?;
                if let Some(value) = value {
                    map.serialize_entry("value", value)?;
                }
                map.end()
            }
            Self::Other(value) => value.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for PushAction {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Self::from_value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_actions_are_typed_and_everything_round_trips() {
        let cases = [
            (json!("notify"), Some(PushAction::Notify)),
            (json!("dont_notify"), Some(PushAction::DontNotify)),
            (json!("coalesce"), Some(PushAction::Coalesce)),
            (
                json!({"set_tweak": "sound", "value": "default"}),
                Some(PushAction::sound("default")),
            ),
            (
                json!({"set_tweak": "highlight"}),
                Some(PushAction::SetTweak {
                    name: "highlight".into(),
                    value: None,
                }),
            ),
            (
                json!({"set_tweak": "highlight", "value": null}),
                Some(PushAction::SetTweak {
                    name: "highlight".into(),
                    value: Some(Value::Null),
                }),
            ),
            (json!("org.example.custom"), None),
            (
                json!({"set_tweak": "sound", "value": "x", "extra": 1}),
                None,
            ),
            (json!({"set_tweak": 5}), None),
            (json!(5), None),
        ];
        for (wire, typed) in cases {
            let action: PushAction = serde_json::from_value(wire.clone()).unwrap();
            match typed {
                Some(expected) => assert_eq!(action, expected, "{wire}"),
                None => assert_eq!(action, PushAction::Other(wire.clone())),
            }
            assert_eq!(serde_json::to_value(&action).unwrap(), wire);
        }
    }
}
