//! The wire adapter (`--example wire`): one JSON line per request to the client's typed method,
//! one line per answer, answered as they come.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::support::{amqp_url, client, known_user, new_user, shared_broker, worker};

/// Built beside this test binary: `cargo test` builds the examples.
fn adapter() -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let path = deps
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/wire");
    assert!(
        path.exists(),
        "{} is missing: run `cargo test` (it builds the examples)",
        path.display()
    );
    path
}

/// Sends the lines at once and collects one answer per id.
async fn exchange(lines: &[Value]) -> HashMap<String, Value> {
    let worker = worker();
    let mut child = Command::new(adapter())
        .env("AMQP_URL", amqp_url())
        .env("PUBLISHER_USER_ID", &worker.publisher)
        .env("RPC_QUEUE", &worker.queue)
        .env("RPC_READ_QUEUE", &worker.read_queue)
        .env("EVALUATE_QUEUE", &worker.evaluate_queue)
        .env("DELIVERY_QUEUE", &worker.deliver_queue)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    drop(stdin);
    let mut answers = HashMap::new();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(line) = out.next_line().await.unwrap() {
        let answer: Value = serde_json::from_str(&line).unwrap();
        let id = answer["id"].as_str().unwrap().to_owned();
        assert!(
            answers.insert(id, answer["reply"].clone()).is_none(),
            "answered twice: {line}"
        );
    }
    assert!(child.wait().await.unwrap().success());
    answers
}

#[tokio::test]
async fn each_request_is_answered_by_the_typed_call_of_its_op() {
    let _broker = shared_broker().await;
    let user = known_user(&client(), "wire").await;
    let stranger = new_user("stranger");
    let address = |op: &str| json!({"op": op, "user_id": user, "scope": "global", "kind": "content", "rule_id": "pizza"});
    let mut set = address("set_pushrule");
    set["rule"] = json!({"pattern": "pizza", "actions": ["notify"]});
    set["message_id"] = json!(format!("wire-{user}"));
    let lines = [
        json!({"id": "set", "request": set}),
        json!({"id": "defaults", "request": {"op": "get_pushrules", "user_id": stranger}}),
        json!({"id": "missing", "request": {"op": "get_pushrule", "user_id": stranger, "scope": "global", "kind": "content", "rule_id": "nope"}}),
        json!({"id": "two-selectors", "request": {"op": "delete_pushers", "user_id": user, "all": true, "device_ids": ["A"]}}),
        json!({"id": "unknown-op", "request": {"op": "frobnicate", "user_id": user}}),
        json!({"id": "batch", "request": {"op": "evaluate", "events": [
            {"event": {"type": "m.room.message", "room_id": "!r:example.org", "sender": stranger, "content": {"body": "hi"}},
             "room": {"member_count": 10},
             "recipients_by_server": [{"server": "example.org", "localparts": ["someone"]}]},
            5,
        ]}}),
    ];

    let answers = exchange(&lines).await;

    assert_eq!(answers.len(), lines.len());
    assert_eq!(answers["set"], json!({"ok": true, "body": {}}));
    assert_eq!(
        answers["defaults"]["body"]["global"]["override"][0]["rule_id"],
        ".m.rule.master"
    );
    assert_eq!(answers["missing"]["error"]["kind"], "NotFound");
    assert_eq!(answers["missing"]["error"]["status"], 404);
    assert_eq!(answers["two-selectors"]["error"]["errcode"], "M_BAD_JSON");
    assert_eq!(answers["unknown-op"]["error"]["kind"], "Unrecognized");
    let results = &answers["batch"]["body"]["results"];
    assert_eq!(
        results[0],
        json!({"ok": true, "body": {"notify": {"@someone:example.org": ["notify"]}, "evaluated": 1}})
    );
    assert_eq!(results[1]["error"]["kind"], "BadJson");

    // The write went with its message_id: sent again after a delete, it is not applied again.
    let replay = exchange(&[json!({"id": "delete", "request": address("delete_pushrule")})]).await;
    assert_eq!(replay["delete"]["ok"], true);
    let again = exchange(&[json!({"id": "set", "request": set})]).await;
    assert_eq!(again["set"]["ok"], true);
    let read = exchange(&[json!({"id": "get", "request": address("get_pushrule")})]).await;
    assert_eq!(read["get"]["error"]["kind"], "NotFound");
}
