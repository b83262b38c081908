//! Pushers as the Matrix client-server API has them, and the bodies of the pusher ops.

use serde::{Deserialize, Serialize};

use crate::json::{present, JsonObject};

/// The body of `POST /pushers/set` as the Matrix client sent it, to hand on as it came: every field
/// may be missing here (the workers answer `MissingParam` naming them all) and each is checked by
/// the workers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PusherSetAction {
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub pushkey: Option<String>,
    /// `Some(None)` (`"kind": null`) deletes the pusher.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub kind: Option<Option<String>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub app_id: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub app_display_name: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub device_display_name: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub profile_tag: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub lang: Option<String>,
    /// `url` (HTTP pushers: the gateway's notify URL), `format`, and anything else the app sets.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub data: Option<JsonObject>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub append: Option<bool>,
    /// MSC3881; `Some(None)` is `null`: not given.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub enabled: Option<Option<bool>>,
    #[serde(
        rename = "org.matrix.msc3881.enabled",
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub msc3881_enabled: Option<Option<bool>>,
    /// Sent as given; the workers ignore what they do not know (a `device_id` here among it: the
    /// device is the access token's, given to `set_pusher` beside the action).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A pusher as `get_pushers` answers it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pusher {
    pub pushkey: String,
    /// `http` or `email`.
    pub kind: String,
    pub app_id: String,
    pub app_display_name: String,
    pub device_display_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_tag: Option<String>,
    pub lang: String,
    pub data: JsonObject,
    pub enabled: bool,
    #[serde(rename = "org.matrix.msc3881.enabled")]
    pub msc3881_enabled: bool,
    /// The device whose access token set it, when known (HTTP pushers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    #[serde(
        rename = "org.matrix.msc3881.device_id",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub msc3881_device_id: Option<String>,
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `get_pushers`: the body of `GET /pushers`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pushers {
    pub pushers: Vec<Pusher>,
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `delete_pushers`: how many pushers went.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeletedPushers {
    pub deleted: u64,
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Which pushers `delete_pushers` removes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PusherSelector {
    /// Those of these devices (a logout, a device deletion).
    DeviceIds(Vec<String>),
    /// Those of every device but this one (a password change that keeps this device).
    ExceptDeviceId(String),
    /// Every one.
    All,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_action_goes_on_as_it_came_absent_null_and_unknown_fields_included() {
        let cases = [
            json!({"pushkey": "k", "kind": null, "app_id": "a"}),
            json!({"pushkey": "k", "kind": "http", "enabled": null, "org.matrix.msc3881.enabled": false}),
            json!({"pushkey": "k", "device_id": "FROM-CLIENT", "data": {"url": 5, "__proto__": {}}}),
            json!({}),
        ];
        for wire in cases {
            let action: PusherSetAction = serde_json::from_value(wire.clone()).unwrap();
            assert_eq!(serde_json::to_value(&action).unwrap(), wire);
        }
    }

    #[test]
    fn a_null_where_the_contract_wants_a_value_is_refused() {
        for wire in [
            json!({"pushkey": null}),
            json!({"data": null}),
            json!({"append": null}),
        ] {
            assert!(
                serde_json::from_value::<PusherSetAction>(wire.clone()).is_err(),
                "{wire}"
            );
        }
    }
}
