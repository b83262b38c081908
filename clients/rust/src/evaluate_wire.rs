//! `evaluate` on the wire: the request as the client sends it, and the reply as the caller gets it.
//!
//! The client asks for the compact reply by positions (`compact` and `runs`: a few bytes for a
//! large room) and hands back the default shape, whichever form the worker answered in (one that
//! predates `runs` answers `user_ids`, one that predates `compact` the default form). From
//! [`GROUP_RECIPIENTS_FROM`] recipients a list is sent grouped by server (`recipients_by_server`).

use std::borrow::Cow;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::evaluation::{Evaluation, Event, Recipient, Recipients, RecipientsOfServer, Room};
use crate::json::is_false;
use crate::push_action::PushAction;

/// Recipients from which a list is sent grouped by server.
pub const GROUP_RECIPIENTS_FROM: usize = 100;

/// The single form without `op`: also an entry of the batch form.
#[derive(Serialize)]
struct Entry<'a> {
    event: &'a Event,
    room: &'a Room,
    #[serde(skip_serializing_if = "Option::is_none")]
    recipients: Option<&'a [Recipient]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recipients_by_server: Option<Cow<'a, [RecipientsOfServer]>>,
    #[serde(skip_serializing_if = "is_false")]
    explain: bool,
    compact: bool,
    runs: bool,
}

/// One event ready to send: its entry as JSON, and the user IDs in the order it names them (what a
/// reply's runs count in).
pub(crate) struct PreparedEntry {
    pub json: Vec<u8>,
    pub order: Vec<String>,
}

impl PreparedEntry {
    pub fn new(
        event: &Event,
        room: &Room,
        recipients: Recipients<'_>,
        explain: bool,
    ) -> Result<Self, serde_json::Error> {
        let mut entry = Entry {
            event,
            room,
            recipients: None,
            recipients_by_server: None,
            explain,
            compact: true,
            runs: true,
        };
        let order = match recipients {
            Recipients::ByServer(groups) => {
                entry.recipients_by_server = Some(Cow::Borrowed(groups));
                expand(groups)
            }
            Recipients::List(list) => {
                let grouped = if list.len() >= GROUP_RECIPIENTS_FROM {
                    group_by_server(list)
                } else {
                    None
                };
                match grouped {
                    Some((groups, order)) => {
                        entry.recipients_by_server = Some(Cow::Owned(groups));
                        order
                    }
                    None => {
                        entry.recipients = Some(list);
                        list.iter().map(|r| r.user_id.clone()).collect()
                    }
                }
            }
        };
        Ok(Self {
            json: serde_json::to_vec(&entry)?,
            order,
        })
    }

    /// The single form: the entry with `op` in front.
    pub fn single(&self) -> Vec<u8> {
        single_form(&self.json)
    }
}

/// The single form of an entry's JSON: the entry with `op` in front.
pub(crate) fn single_form(entry: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(entry.len() + 16);
    body.extend_from_slice(br#"{"op":"evaluate","#);
    // An entry is a JSON object with at least `event`: past its `{`.
    body.extend_from_slice(&entry[1..]);
    body
}

/// The batch form of these entries' JSON.
pub(crate) fn batch_form<'a>(entries: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut body = br#"{"op":"evaluate","events":["#.to_vec();
    for (index, entry) in entries.enumerate() {
        if index > 0 {
            body.push(b',');
        }
        body.extend_from_slice(entry);
    }
    body.extend_from_slice(b"]}");
    body
}

/// The user IDs the groups stand for, in their order.
fn expand(groups: &[RecipientsOfServer]) -> Vec<String> {
    groups
        .iter()
        .flat_map(|group| {
            group
                .localparts
                .iter()
                .map(move |localpart| format!("@{localpart}:{}", group.server))
        })
        .collect()
}

/// The grouped form (one group per server, in the order of each server's first recipient,
/// localparts in the list's order; display names only in a group where some recipient has one) and
/// the user IDs in the order it names them. `None` when a user ID has no `@` or no `:`: the plain
/// form then carries the list, and the worker's refusal names the recipient.
pub(crate) fn group_by_server(
    list: &[Recipient],
) -> Option<(Vec<RecipientsOfServer>, Vec<String>)> {
    let mut groups: Vec<(RecipientsOfServer, Vec<String>)> = Vec::new();
    let mut index_of: HashMap<&str, usize> = HashMap::new();
    for recipient in list {
        let user_id = recipient.user_id.as_str();
        let colon = user_id.find(':')?;
        if !user_id.starts_with('@') {
            return None;
        }
        let server = &user_id[colon + 1..];
        let position = *index_of.entry(server).or_insert_with(|| {
            groups.push((
                RecipientsOfServer {
                    server: server.to_owned(),
                    localparts: Vec::new(),
                    display_names: None,
                    extra: Default::default(),
                },
                Vec::new(),
            ));
            groups.len() - 1
        });
        let (group, members) = &mut groups[position];
        if recipient.display_name.is_some() && group.display_names.is_none() {
            group.display_names = Some(vec![None; group.localparts.len()]);
        }
        group.localparts.push(user_id[1..colon].to_owned());
        if let Some(names) = &mut group.display_names {
            names.push(recipient.display_name.clone());
        }
        members.push(user_id.to_owned());
    }
    let mut order = Vec::with_capacity(list.len());
    let groups = groups
        .into_iter()
        .map(|(group, members)| {
            order.extend(members);
            group
        })
        .collect();
    Some((groups, order))
}

#[derive(Deserialize)]
struct WireEvaluation {
    #[serde(default)]
    notify: Option<HashMap<String, Vec<PushAction>>>,
    #[serde(default)]
    notify_groups: Option<Vec<WireGroup>>,
    evaluated: u64,
    #[serde(default)]
    rule_ids: Option<HashMap<String, Option<String>>>,
}

#[derive(Deserialize)]
struct WireGroup {
    actions: Vec<PushAction>,
    #[serde(default)]
    user_ids: Option<Vec<String>>,
    #[serde(default)]
    runs: Option<Vec<i64>>,
}

/// One event's answer in the default form; `None` when the body is not an evaluate reply.
pub(crate) fn decode(body: &RawValue, order: &[String]) -> Option<Evaluation> {
    let wire: WireEvaluation = serde_json::from_str(body.get()).ok()?;
    let notify = match (wire.notify, wire.notify_groups) {
        (_, Some(groups)) => expand_groups(groups, order),
        (Some(notify), None) => notify,
        (None, None) => return None,
    };
    Some(Evaluation {
        notify,
        evaluated: wire.evaluated,
        rule_ids: wire.rule_ids,
    })
}

fn expand_groups(groups: Vec<WireGroup>, order: &[String]) -> HashMap<String, Vec<PushAction>> {
    let mut notify = HashMap::new();
    for group in groups {
        match group.runs {
            Some(runs) => {
                for pair in runs.chunks_exact(2) {
                    let first = usize::try_from(pair[0].max(0)).unwrap_or(usize::MAX);
                    let count = usize::try_from(pair[1].max(0)).unwrap_or(0);
                    let end = first.saturating_add(count).min(order.len());
                    for user_id in order.get(first..end).unwrap_or_default() {
                        notify.insert(user_id.clone(), group.actions.clone());
                    }
                }
            }
            None => {
                for user_id in group.user_ids.unwrap_or_default() {
                    notify.insert(user_id, group.actions.clone());
                }
            }
        }
    }
    notify
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(value: serde_json::Value) -> Box<RawValue> {
        RawValue::from_string(value.to_string()).unwrap()
    }

    fn recipients(ids: &[&str]) -> Vec<Recipient> {
        ids.iter().map(|id| Recipient::new(*id)).collect()
    }

    #[test]
    fn groups_keep_each_servers_first_appearance_and_name_display_names_only_where_given() {
        let mut list = recipients(&["@a:one", "@b:two", "@c:one", "@d:two"]);
        list[3].display_name = Some("Dee".into());

        let (groups, order) = group_by_server(&list).unwrap();

        assert_eq!(
            serde_json::to_value(&groups).unwrap(),
            json!([
                {"server": "one", "localparts": ["a", "c"]},
                {"server": "two", "localparts": ["b", "d"], "display_names": [null, "Dee"]},
            ])
        );
        assert_eq!(order, ["@a:one", "@c:one", "@b:two", "@d:two"]);
    }

    #[test]
    fn a_user_id_without_a_server_leaves_the_list_ungrouped() {
        assert!(group_by_server(&recipients(&["@a:one", "nobody"])).is_none());
        assert!(group_by_server(&recipients(&["a:one"])).is_none());
    }

    #[test]
    fn runs_name_positions_in_the_order_sent() {
        let order: Vec<String> = ["@a:x", "@b:x", "@c:x", "@d:x", "@e:x"]
            .map(String::from)
            .to_vec();
        let body = raw(json!({
            "notify_groups": [
                {"actions": ["notify"], "runs": [0, 2, 4, 1]},
                {"actions": ["notify", {"set_tweak": "highlight"}], "runs": [2, 1]},
                // Out of range: ignored, as the TypeScript client does.
                {"actions": ["notify"], "runs": [9, 3, -1, 0]},
            ],
            "evaluated": 5,
        }));

        let answer = decode(&body, &order).unwrap();

        let highlight = vec![
            PushAction::Notify,
            PushAction::SetTweak {
                name: "highlight".into(),
                value: None,
            },
        ];
        let expected: HashMap<String, Vec<PushAction>> = [
            ("@a:x", vec![PushAction::Notify]),
            ("@b:x", vec![PushAction::Notify]),
            ("@e:x", vec![PushAction::Notify]),
            ("@c:x", highlight),
        ]
        .into_iter()
        .map(|(user, actions)| (user.to_owned(), actions))
        .collect();
        assert_eq!(answer.notify, expected);
        assert_eq!(answer.evaluated, 5);
        assert_eq!(answer.rule_ids, None);
    }

    #[test]
    fn user_ids_and_the_default_form_are_taken_too() {
        let by_ids = raw(json!({
            "notify_groups": [{"actions": ["notify"], "user_ids": ["@a:x"]}],
            "evaluated": 2,
            "rule_ids": {"@a:x": ".m.rule.message", "@b:x": null},
        }));
        let default = raw(json!({"notify": {"@a:x": ["notify"]}, "evaluated": 2}));

        let first = decode(&by_ids, &[]).unwrap();
        let second = decode(&default, &[]).unwrap();

        assert_eq!(first.notify, second.notify);
        let rule_ids = first.rule_ids.unwrap();
        assert_eq!(rule_ids["@a:x"].as_deref(), Some(".m.rule.message"));
        assert_eq!(rule_ids["@b:x"], None);
        assert!(decode(&raw(json!({"evaluated": 1})), &[]).is_none());
    }

    #[test]
    fn the_single_form_is_the_entry_with_its_op() {
        let event = Event::new("m.room.message", "!r:x", "@s:x", Default::default());
        let room = Room {
            member_count: 2,
            ..Room::default()
        };
        let list = recipients(&["@a:x"]);
        let entry = PreparedEntry::new(&event, &room, (&list).into(), true).unwrap();

        let single: serde_json::Value = serde_json::from_slice(&entry.single()).unwrap();
        let batch: serde_json::Value =
            serde_json::from_slice(&batch_form([&entry.json[..], &entry.json[..]].into_iter()))
                .unwrap();

        assert_eq!(single["op"], "evaluate");
        assert_eq!(single["recipients"], json!([{"user_id": "@a:x"}]));
        assert_eq!(
            (&single["explain"], &single["compact"], &single["runs"]),
            (&json!(true), &json!(true), &json!(true))
        );
        assert_eq!(batch["events"].as_array().unwrap().len(), 2);
        assert_eq!(batch["events"][0].get("op"), None);
    }
}
