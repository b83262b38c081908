//! Real workers for the tests: the project's built worker (`node dist/main.js`) on queues and a
//! database of its own (scripts/client-test-worker.ts), against the broker and MongoDB of
//! `AMQP_URL` / `MONGODB_URL` (the local services of `scripts/services.sh up` by default;
//! scripts/rust-client.sh starts them when nothing answers). One worker per test run; its queues
//! and database are deleted when this process ends, however it ends.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties};
use matrix_push_worker_client::{ClientOptions, PushRulesClient};
use serde::Deserialize;
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

pub fn amqp_url() -> String {
    std::env::var("AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672".into())
}

/// The checkout the tests run in. From `CARGO_MANIFEST_DIR` as cargo sets it when it runs the
/// tests, not as it was when they were compiled: the build directory is shared by checkouts
/// (`CARGO_TARGET_DIR` in ~/.cache), and a binary built in another one would name that one.
pub fn repository() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest.join("../..")
}

/// The Node the project runs on: `MPW_NODE` (the suite passes its own), else the one npm installs
/// in node_modules (the system's may be older than the project needs), else `node` from PATH.
fn node() -> PathBuf {
    if let Some(node) = std::env::var_os("MPW_NODE").filter(|node| !node.is_empty()) {
        return node.into();
    }
    let local = repository().join("node_modules/.bin/node");
    if local.exists() {
        local
    } else {
        "node".into()
    }
}

/// The names the run's worker serves on.
#[derive(Debug, Deserialize)]
pub struct Worker {
    pub queue: String,
    pub read_queue: String,
    pub evaluate_queue: String,
    pub deliver_queue: String,
    /// The broker user of `AMQP_URL`, which the worker trusts.
    pub publisher: String,
}

/// Its stdin: open as long as this process lives.
static WRAPPER: OnceLock<Mutex<(Child, BufReader<ChildStdout>)>> = OnceLock::new();
static WORKER: OnceLock<Worker> = OnceLock::new();

/// The run's worker, started by the first test that asks.
pub fn worker() -> &'static Worker {
    WORKER.get_or_init(|| {
        let prefix = format!("rsclient.{:010x}", fastrand::u64(..) >> 24);
        let mut child = Command::new(node())
            .args(["--import", "tsx", "scripts/client-test-worker.ts", &prefix])
            .current_dir(repository())
            .env("AMQP_URL", amqp_url())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node runs scripts/client-test-worker.ts");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("its first line");
        let worker: Worker = serde_json::from_str(&line).unwrap_or_else(|_| {
            panic!("the test worker did not start (its output is above): {line:?}")
        });
        WRAPPER
            .set(Mutex::new((child, stdout)))
            .unwrap_or_else(|_| unreachable!("set once"));
        worker
    })
}

/// The broker-restart test stops the broker: it runs alone; every other test shares.
static BROKER: RwLock<()> = RwLock::const_new(());

pub async fn shared_broker() -> RwLockReadGuard<'static, ()> {
    BROKER.read().await
}

pub async fn exclusive_broker() -> RwLockWriteGuard<'static, ()> {
    BROKER.write().await
}

/// The options of a client of the run's worker; tests change what they need.
pub fn options() -> ClientOptions {
    let worker = worker();
    ClientOptions {
        publisher_user_id: Some(worker.publisher.clone()),
        queue: worker.queue.clone(),
        read_queue: Some(worker.read_queue.clone()),
        evaluate_queue: worker.evaluate_queue.clone(),
        deliver_queue: worker.deliver_queue.clone(),
        timeout: Duration::from_secs(15),
        ..ClientOptions::new(amqp_url())
    }
}

pub fn client() -> PushRulesClient {
    PushRulesClient::new(options()).expect("valid options")
}

/// A user of this test alone (the database is shared by the run).
pub fn new_user(name: &str) -> String {
    format!("@{name}-{:08x}:example.org", fastrand::u32(..))
}

/// A new user who has push rules, as one has after a first `GET /pushrules/` (a rule write for a
/// user with none is `M_NOT_FOUND`, as in Synapse).
pub async fn known_user(client: &PushRulesClient, name: &str) -> String {
    let user = new_user(name);
    client.get_push_rules(&user).await.expect("get_push_rules");
    user
}

/// A queue nobody consumes, declared by the test (never by the client): calls to it get no reply.
pub struct UnservedQueue {
    pub name: String,
    connection: Connection,
}

impl UnservedQueue {
    pub async fn declare() -> Self {
        let name = format!("rsclient.unserved.{:08x}", fastrand::u32(..));
        let connection = Connection::connect(&amqp_url(), ConnectionProperties::default())
            .await
            .expect("the broker");
        let channel = connection.create_channel().await.expect("a channel");
        channel
            .queue_declare(
                name.as_str().into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("declared");
        Self { name, connection }
    }

    pub async fn delete(self) {
        if let Ok(channel) = self.connection.create_channel().await {
            let _ = channel
                .queue_delete(self.name.as_str().into(), QueueDeleteOptions::default())
                .await;
        }
        let _ = self.connection.close(200, "done".into()).await;
    }
}
