//! The Rust client's wire adapter, for the conformance run every client passes (issue 41).
//!
//! Reads one JSON line per request from stdin, `{"id": "...", "request": <the request body as on
//! the wire, with "op", plus "message_id" when given>}`, calls the client's typed method for that
//! op, and writes one line per answer, `{"id": "...", "reply": {"ok": true, "body": …} |
//! {"ok": false, "error": {"kind", "errcode", "error", "status"}}}`. Requests are served
//! concurrently, over the client's one connection: answers may come out of order.
//!
//! Environment: `AMQP_URL` (required), `PUBLISHER_USER_ID`; the queues as the workers name them,
//! `RPC_QUEUE`, `RPC_READ_QUEUE`, `EVALUATE_QUEUE`, `DELIVERY_QUEUE` (the defaults otherwise);
//! `WIRE_TIMEOUT_MS`, each call's deadline (default 15000).
//!
//! A request the typed methods cannot express (a field of another type than the contract's, two
//! selectors for `delete_pushers`, an op the client has no method for) is answered as the client
//! refuses what cannot be sent: `BadJson` (an unknown op: `Unrecognized`), nothing sent.
//!
//! `cargo run -q --release --manifest-path clients/rust/Cargo.toml --example wire`

mod dispatch;

use std::time::Duration;

use matrix_push_worker_client::{ClientOptions, PushRulesClient, PushRulesError};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

fn main() {
    // Deeply nested requests (the contract's depth cases) are parsed, sent and dropped on these
    // threads: room for a few thousand levels.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(32 << 20)
        .build()
        .expect("a tokio runtime");
    let code = runtime.block_on(async {
        match options().and_then(|options| PushRulesClient::new(options).map_err(|e| e.to_string()))
        {
            Ok(client) => serve(client).await,
            Err(problem) => {
                eprintln!("wire: {problem}");
                2
            }
        }
    });
    std::process::exit(code);
}

fn options() -> Result<ClientOptions, String> {
    let url = std::env::var("AMQP_URL").map_err(|_| "AMQP_URL is not set".to_owned())?;
    let mut options = ClientOptions::new(url);
    options.publisher_user_id = std::env::var("PUBLISHER_USER_ID")
        .ok()
        .filter(|u| !u.is_empty());
    let queue = |name: &str| std::env::var(name).ok().filter(|q| !q.is_empty());
    if let Some(queue) = queue("RPC_QUEUE") {
        options.queue = queue;
    }
    if let Some(queue) = queue("RPC_READ_QUEUE") {
        options.read_queue = Some(queue);
    }
    if let Some(queue) = queue("EVALUATE_QUEUE") {
        options.evaluate_queue = queue;
    }
    if let Some(queue) = queue("DELIVERY_QUEUE") {
        options.deliver_queue = queue;
    }
    let timeout = match std::env::var("WIRE_TIMEOUT_MS") {
        Ok(ms) => ms
            .parse()
            .map_err(|_| "WIRE_TIMEOUT_MS is not a number of milliseconds".to_owned())?,
        Err(_) => 15_000,
    };
    options.timeout = Duration::from_millis(timeout);
    Ok(options)
}

async fn serve(client: PushRulesClient) -> i32 {
    let (answers, mut to_write) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = to_write.recv().await {
            let written = stdout.write_all(line.as_bytes()).await;
            if written.and(stdout.flush().await).is_err() {
                return;
            }
        }
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut calls = JoinSet::new();
    let mut code = 0;
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(error) => {
                eprintln!("wire: cannot read stdin: {error}");
                code = 1;
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let client = client.clone();
        let answers = answers.clone();
        calls.spawn(async move {
            let answer = answer(&client, &line).await;
            let _ = answers.send(format!("{answer}\n"));
        });
    }
    while calls.join_next().await.is_some() {}
    drop(answers);
    let _ = writer.await;
    client.close().await;
    code
}

/// The answer line for one request line.
async fn answer(client: &PushRulesClient, line: &str) -> Value {
    let parsed = {
        let mut deserializer = serde_json::Deserializer::from_str(line);
        deserializer.disable_recursion_limit();
        <Value as serde::Deserialize>::deserialize(&mut deserializer)
    };
    let Ok(Value::Object(mut line)) = parsed else {
        return json!({"id": null, "reply": failure(&dispatch::invalid("The line is not a JSON object."))});
    };
    let id = line.remove("id").unwrap_or(Value::Null);
    let line_message_id = line.remove("message_id");
    let request = line.remove("request").unwrap_or(Value::Null);
    let reply = match dispatch::call(client, request, line_message_id).await {
        Ok(body) => json!({"ok": true, "body": body}),
        Err(error) => failure(&error),
    };
    json!({"id": id, "reply": reply})
}

fn failure(error: &PushRulesError) -> Value {
    json!({"ok": false, "error": error.body()})
}
