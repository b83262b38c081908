//! The Rust client's closed-loop driver for `npm run bench -- --only clients` (issue 41).
//!
//! Reads one JSON object on stdin, the workload every client's driver is given:
//!
//! ```json
//! {"op": "get_pushrules" | "evaluate", "concurrency": 64, "warmup_seconds": 1, "measure_seconds": 3,
//!  "users": ["@a:b", …], "events": [<event>, …], "room": <room>, "recipients": [<recipient>, …]}
//! ```
//!
//! and runs `concurrency` callers, each sending its next call of the client's typed method
//! (`get_push_rules`, or `evaluate` of one of `events` to `recipients`) as soon as the last one is
//! answered. Caller `lane`'s `i`th call names `users[lane + concurrency * (i % (users.len() /
//! concurrency))]` (each caller its own users, as bench/support/workloads.ts's `UserPool.pick`) or
//! `events[(lane + i * concurrency) % events.len()]`. A call counts when it both starts and ends
//! in the measured window. Prints one line on stdout, `{"latencies_ms": […], "errors": n,
//! "first_error": text | null, "cpu_seconds": s}`: the round trips as the caller saw them, and the
//! CPU time the process used in the measured window (`/proc/self/stat`; null elsewhere).
//!
//! Environment: `AMQP_URL` (required), `PUBLISHER_USER_ID`, and the workers' `RPC_QUEUE`,
//! `RPC_READ_QUEUE`, `EVALUATE_QUEUE`. On tokio's multi-thread runtime, as a homeserver's.
//!
//! `cargo run -q --release --manifest-path clients/rust/Cargo.toml --example bench < workload.json`

use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use matrix_push_worker_client::{ClientOptions, Event, PushRulesClient, Recipient, Room};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct Workload {
    op: String,
    concurrency: usize,
    warmup_seconds: f64,
    measure_seconds: f64,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    events: Vec<Event>,
    #[serde(default)]
    room: Room,
    #[serde(default)]
    recipients: Vec<Recipient>,
}

#[derive(Default)]
struct Tally {
    latencies_ms: Vec<f64>,
    errors: usize,
    first_error: Option<String>,
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(run()) {
        Ok(line) => println!("{line}"),
        Err(problem) => {
            eprintln!("bench: {problem}");
            std::process::exit(2);
        }
    }
}

async fn run() -> Result<String, String> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| format!("cannot read stdin: {e}"))?;
    let work: Workload =
        serde_json::from_str(&input).map_err(|e| format!("not a workload: {e}"))?;
    match work.op.as_str() {
        "get_pushrules" if work.users.len() < work.concurrency.max(1) => {
            return Err("get_pushrules needs at least as many users as callers".into())
        }
        "evaluate" if work.events.is_empty() => return Err("evaluate needs events".into()),
        "get_pushrules" | "evaluate" => {}
        other => return Err(format!("unknown op {other:?}: get_pushrules or evaluate")),
    }
    let client = PushRulesClient::new(options()?).map_err(|e| e.to_string())?;
    let work = Arc::new(work);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let measure_from = started + Duration::from_secs_f64(work.warmup_seconds);
    let measure_to = measure_from + Duration::from_secs_f64(work.measure_seconds);
    let cpu = tokio::spawn(async move {
        tokio::time::sleep_until(measure_from.into()).await;
        let cpu_from = process_cpu_seconds();
        tokio::time::sleep_until(measure_to.into()).await;
        Some(process_cpu_seconds()? - cpu_from?)
    });
    let lanes: Vec<_> = (0..work.concurrency)
        .map(|lane| {
            let (client, work, tally) = (client.clone(), work.clone(), tally.clone());
            tokio::spawn(async move {
                let mut own = Tally::default();
                for i in 0.. {
                    let begin = Instant::now();
                    if begin >= measure_to {
                        break;
                    }
                    let outcome = call(&client, &work, lane, i).await;
                    let end = Instant::now();
                    if begin < measure_from || end > measure_to {
                        continue;
                    }
                    match outcome {
                        Ok(()) => own.latencies_ms.push((end - begin).as_secs_f64() * 1000.0),
                        Err(error) => {
                            own.errors += 1;
                            own.first_error.get_or_insert(error);
                        }
                    }
                }
                let mut all = tally
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                all.latencies_ms.append(&mut own.latencies_ms);
                all.errors += own.errors;
                if all.first_error.is_none() {
                    all.first_error = own.first_error;
                }
            })
        })
        .collect();
    for lane in lanes {
        lane.await.map_err(|e| format!("a caller panicked: {e}"))?;
    }
    let cpu_seconds = cpu.await.ok().flatten();
    client.close().await;
    let tally = std::mem::take(&mut *tally.lock().unwrap_or_else(|p| p.into_inner()));
    Ok(json!({
        "latencies_ms": tally.latencies_ms,
        "errors": tally.errors,
        "first_error": tally.first_error,
        "cpu_seconds": cpu_seconds,
    })
    .to_string())
}

async fn call(
    client: &PushRulesClient,
    work: &Workload,
    lane: usize,
    i: usize,
) -> Result<(), String> {
    let concurrency = work.concurrency;
    if work.op == "get_pushrules" {
        let per_lane = work.users.len() / concurrency;
        let user = &work.users[lane + concurrency * (i % per_lane)];
        client
            .get_push_rules(user)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    } else {
        let event = &work.events[(lane + i * concurrency) % work.events.len()];
        client
            .evaluate(event, &work.room, &work.recipients)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// User and system CPU time of this process so far: `/proc/self/stat`'s utime and stime, in the
/// kernel's USER_HZ ticks (100 a second on every common build).
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which may contain spaces, closed by ')'.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn options() -> Result<ClientOptions, String> {
    let url = std::env::var("AMQP_URL").map_err(|_| "AMQP_URL is not set".to_owned())?;
    let setting = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    let mut options = ClientOptions::new(url);
    options.publisher_user_id = setting("PUBLISHER_USER_ID");
    if let Some(queue) = setting("RPC_QUEUE") {
        options.queue = queue;
    }
    if let Some(queue) = setting("RPC_READ_QUEUE") {
        options.read_queue = Some(queue);
    }
    if let Some(queue) = setting("EVALUATE_QUEUE") {
        options.evaluate_queue = queue;
    }
    Ok(options)
}
