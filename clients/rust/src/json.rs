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

/// Whether JSON text nests arrays and objects more than `max` levels deep (`{}` and `[]` are one
/// level, `{"a":[]}` two). One pass over the bytes, no parse: brackets inside strings do not
/// count, and a backslash in a string escapes the next byte. As the workers count
/// (src/matrix/json-depth.ts), so that what the client keeps out of a batch is what they refuse.
pub(crate) fn nests_deeper_than(text: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in text {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            // Never below zero: stray closers cannot buy room for deeper nesting later.
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::nests_deeper_than;

    #[test]
    fn depth_counts_brackets_outside_strings_only() {
        assert!(!nests_deeper_than(br#"{"a":[]}"#, 2));
        assert!(nests_deeper_than(br#"{"a":[{}]}"#, 2));
        assert!(!nests_deeper_than(br#"{"a":"[[[[\"[["}"#, 1));
        assert!(!nests_deeper_than(br#"{"a":"\\"}"#, 1));
        assert!(!nests_deeper_than(b"]]]]{}", 1));
    }
}
