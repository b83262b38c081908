//! One wire request to the typed method of its op, and its answer back to JSON.

use matrix_push_worker_client::{
    ErrorBody, ErrorKind, EvaluateEvent, Evaluation, Event, NewPushRule, Notification,
    NotifyRecipient, PushAction, PushRulesClient, PushRulesError, PusherSelector, PusherSetAction,
    Recipient, Recipients, RecipientsOfServer, Room,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

type Answer = Result<Value, PushRulesError>;

/// A request the typed methods cannot express: refused as the client refuses what it cannot send.
pub fn invalid(message: impl Into<String>) -> PushRulesError {
    PushRulesError::Invalid(message.into())
}

fn unrecognized(message: String) -> PushRulesError {
    PushRulesError::Worker(ErrorBody {
        kind: ErrorKind::Unrecognized,
        errcode: "M_UNRECOGNIZED".into(),
        error: message,
        status: 400,
    })
}

/// The request's fields as the op's typed arguments; serde's "missing field `x`" said as the
/// workers say it.
fn fields<T: DeserializeOwned>(request: &Map<String, Value>) -> Result<T, PushRulesError> {
    serde_json::from_value(Value::Object(request.clone())).map_err(|error| {
        let message = error.to_string();
        match message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next())
        {
            Some(field) => invalid(format!("request must have required property '{field}'.")),
            None => invalid(format!("request does not fit the typed call: {message}")),
        }
    })
}

fn body<T: Serialize>(value: T) -> Answer {
    serde_json::to_value(value).map_err(|e| invalid(e.to_string()))
}

/// A write's `{}`.
fn written(_: ()) -> Value {
    Value::Object(Map::new())
}

#[derive(Deserialize)]
struct User {
    user_id: String,
}

#[derive(Deserialize)]
struct Address {
    user_id: String,
    scope: String,
    kind: String,
    rule_id: String,
}

#[derive(Deserialize)]
struct SetRule {
    rule: NewPushRule,
    #[serde(default)]
    before: Option<String>,
    #[serde(default)]
    after: Option<String>,
}

#[derive(Deserialize)]
struct Actions {
    actions: Vec<PushAction>,
}

#[derive(Deserialize)]
struct Enabled {
    enabled: bool,
}

#[derive(Deserialize)]
struct SetPusher {
    user_id: String,
    action: PusherSetAction,
    #[serde(default)]
    device_id: Option<String>,
}

#[derive(Deserialize)]
struct Notify {
    notification: Notification,
    recipients: Vec<NotifyRecipient>,
}

/// One event of `evaluate`, single form or batch entry.
#[derive(Deserialize)]
struct EvaluateEntry {
    event: Event,
    room: Room,
    #[serde(default)]
    recipients: Option<Vec<Recipient>>,
    #[serde(default)]
    recipients_by_server: Option<Vec<RecipientsOfServer>>,
    #[serde(default)]
    explain: bool,
}

impl EvaluateEntry {
    fn parse(entry: &Map<String, Value>) -> Result<Self, PushRulesError> {
        let entry: Self = fields(entry)?;
        match (&entry.recipients, &entry.recipients_by_server) {
            (Some(_), Some(_)) => Err(invalid(
                "evaluate takes only one of recipients and recipients_by_server.",
            )),
            (None, None) => Err(invalid("request must have required property 'recipients'.")),
            _ => Ok(entry),
        }
    }

    fn recipients(&self) -> Recipients<'_> {
        match (&self.recipients, &self.recipients_by_server) {
            (Some(list), _) => list.into(),
            (None, Some(groups)) => groups.into(),
            (None, None) => unreachable!("parse checked"),
        }
    }
}

/// Calls the typed method of `request`'s op.
pub async fn call(
    client: &PushRulesClient,
    request: Value,
    line_message_id: Option<Value>,
) -> Answer {
    let Value::Object(mut request) = request else {
        return Err(invalid("Request body must be a JSON object."));
    };
    let message_id = match request.remove("message_id").or(line_message_id) {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id),
        Some(_) => return Err(invalid("message_id must be a string.")),
    };
    // The envelope's own fields are the typed call's arguments; a key the workers refuse anywhere
    // cannot be among them.
    for key in ["__proto__", "constructor", "prototype"] {
        if request.contains_key(key) {
            return Err(invalid(format!("Key not accepted: {key}.")));
        }
    }
    let op = match request.get("op") {
        Some(Value::String(op)) => op.clone(),
        _ => return Err(invalid("Request needs a string op.")),
    };
    match op.as_str() {
        "get_pushrules" => {
            let User { user_id } = fields(&request)?;
            body(client.get_push_rules(&user_id).await?)
        }
        "get_pushrule" => {
            let a: Address = fields(&request)?;
            body(
                client
                    .get_push_rule(&a.user_id, &a.scope, &a.kind, &a.rule_id)
                    .await?,
            )
        }
        "set_pushrule" => {
            let a: Address = fields(&request)?;
            let set: SetRule = fields(&request)?;
            let mut call =
                client.set_push_rule(&a.user_id, &a.scope, &a.kind, &a.rule_id, &set.rule);
            if let Some(before) = set.before {
                call = call.before(before);
            }
            if let Some(after) = set.after {
                call = call.after(after);
            }
            if let Some(id) = message_id {
                call = call.message_id(id);
            }
            call.await.map(written)
        }
        "delete_pushrule" => {
            let a: Address = fields(&request)?;
            let mut call = client.delete_push_rule(&a.user_id, &a.scope, &a.kind, &a.rule_id);
            if let Some(id) = message_id {
                call = call.message_id(id);
            }
            call.await.map(written)
        }
        "get_pushrule_actions" => {
            let a: Address = fields(&request)?;
            body(
                client
                    .get_push_rule_actions(&a.user_id, &a.scope, &a.kind, &a.rule_id)
                    .await?,
            )
        }
        "set_pushrule_actions" => {
            let a: Address = fields(&request)?;
            let Actions { actions } = fields(&request)?;
            let mut call =
                client.set_push_rule_actions(&a.user_id, &a.scope, &a.kind, &a.rule_id, &actions);
            if let Some(id) = message_id {
                call = call.message_id(id);
            }
            call.await.map(written)
        }
        "get_pushrule_enabled" => {
            let a: Address = fields(&request)?;
            body(
                client
                    .get_push_rule_enabled(&a.user_id, &a.scope, &a.kind, &a.rule_id)
                    .await?,
            )
        }
        "set_pushrule_enabled" => {
            let a: Address = fields(&request)?;
            let Enabled { enabled } = fields(&request)?;
            let mut call =
                client.set_push_rule_enabled(&a.user_id, &a.scope, &a.kind, &a.rule_id, enabled);
            if let Some(id) = message_id {
                call = call.message_id(id);
            }
            call.await.map(written)
        }
        "get_pushers" => {
            let User { user_id } = fields(&request)?;
            body(client.get_pushers(&user_id).await?)
        }
        "set_pusher" => {
            let set: SetPusher = fields(&request)?;
            let mut call = client.set_pusher(&set.user_id, &set.action, set.device_id.as_deref());
            if let Some(id) = message_id {
                call = call.message_id(id);
            }
            call.await.map(written)
        }
        "delete_pushers" => {
            let User { user_id } = fields(&request)?;
            let selector = selector(&request)?;
            let include_email = match request.get("include_email") {
                None => false,
                Some(Value::Bool(include)) => *include,
                Some(_) => return Err(invalid("include_email must be boolean.")),
            };
            let mut call = client
                .delete_pushers(&user_id, selector)
                .include_email(include_email);
            if let Some(id) = message_id {
                call = call.message_id(id);
            }
            body(call.await?)
        }
        "delete_user_data" => {
            let User { user_id } = fields(&request)?;
            let mut call = client.delete_user_data(&user_id);
            if let Some(id) = message_id {
                call = call.message_id(id);
            }
            call.await.map(written)
        }
        "evaluate" => evaluate(client, &request).await,
        "notify" => {
            let notify: Notify = fields(&request)?;
            let mut call = client
                .notify(&notify.notification, &notify.recipients)
                .with_reply();
            if let Some(id) = message_id {
                call = call.message_id(id);
            }
            body(call.await?)
        }
        other => Err(unrecognized(format!(
            "Unrecognized op: {}.",
            Value::String(other.into())
        ))),
    }
}

/// `delete_pushers` takes exactly one selector; the typed call cannot carry two, or none.
fn selector(request: &Map<String, Value>) -> Result<PusherSelector, PushRulesError> {
    let given: Vec<&str> = ["device_ids", "except_device_id", "all"]
        .into_iter()
        .filter(|key| request.contains_key(*key))
        .collect();
    match given.as_slice() {
        [] => Err(invalid(
            "delete_pushers needs one of device_ids, except_device_id or all.",
        )),
        [_, _, ..] => Err(invalid(
            "delete_pushers takes only one of device_ids, except_device_id and all.",
        )),
        ["device_ids"] => match request
            .get("device_ids")
            .cloned()
            .map(serde_json::from_value)
        {
            Some(Ok(ids)) => Ok(PusherSelector::DeviceIds(ids)),
            _ => Err(invalid("device_ids must be array of strings.")),
        },
        ["except_device_id"] => match request.get("except_device_id") {
            Some(Value::String(id)) => Ok(PusherSelector::ExceptDeviceId(id.clone())),
            _ => Err(invalid("except_device_id must be string.")),
        },
        _ => match request.get("all") {
            Some(Value::Bool(true)) => Ok(PusherSelector::All),
            _ => Err(invalid("all must be true when given.")),
        },
    }
}

/// The single form calls `evaluate`; the batch form `evaluate_many`, each entry answered on its own.
async fn evaluate(client: &PushRulesClient, request: &Map<String, Value>) -> Answer {
    let Some(events) = request.get("events") else {
        let entry = EvaluateEntry::parse(request)?;
        let call = client.evaluate(&entry.event, &entry.room, entry.recipients());
        return body(call.explain(entry.explain).await?);
    };
    if ["event", "room", "recipients", "recipients_by_server"]
        .iter()
        .any(|key| request.contains_key(*key))
    {
        return Err(invalid("event is not taken beside events."));
    }
    let Value::Array(events) = events else {
        return Err(invalid("events must be array."));
    };
    if events.is_empty() {
        return Err(invalid("events must not be empty."));
    }
    let parsed: Vec<Result<EvaluateEntry, PushRulesError>> = events
        .iter()
        .map(|entry| match entry {
            Value::Object(entry) => EvaluateEntry::parse(entry),
            _ => Err(invalid("Each entry of events must be a JSON object.")),
        })
        .collect();
    let calls: Vec<EvaluateEvent<'_>> = parsed
        .iter()
        .flatten()
        .map(|entry| EvaluateEvent {
            event: &entry.event,
            room: &entry.room,
            recipients: entry.recipients(),
            explain: entry.explain,
        })
        .collect();
    let mut answers = client.evaluate_many(&calls).await.into_iter();
    let results: Vec<Value> = parsed
        .iter()
        .map(|entry| {
            let answer: Result<Evaluation, PushRulesError> = match entry {
                Err(error) => Err(error.clone()),
                Ok(_) => answers.next().expect("one answer per event sent"),
            };
            match answer {
                Ok(evaluation) => serde_json::json!({"ok": true, "body": evaluation}),
                Err(error) => serde_json::json!({"ok": false, "error": error.body()}),
            }
        })
        .collect();
    Ok(serde_json::json!({"results": results}))
}
