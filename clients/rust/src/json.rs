//! JSON helpers shared by the wire types.

use serde::{Deserialize, Deserializer};

/// A JSON object: the open parts of the contract (an event's content, a pusher's `data`, fields a
/// type does not name).
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// For an optional field that may be absent but not `null` (`#[serde(default, deserialize_with =
/// "present")]`): `null` is handed to `T`, which refuses it unless `T` takes `null` itself (an
/// `Option<T>` inside: absent is `None`, `null` is `Some(None)`). The workers refuse a `null` where
/// the contract wants a string, so the types do too.
pub(crate) fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}
