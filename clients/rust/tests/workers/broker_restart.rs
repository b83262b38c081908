//! Across a broker restart: calls waiting for a reply fail at once as `connection-lost` (their
//! reply-to belonged to the lost connection), and the same client serves later calls on a new
//! connection.
//!
//! It stops the local RabbitMQ (`scripts/services.sh stop-rabbitmq`) and starts it again whatever
//! happens, with every other test of the run held back meanwhile: run it only where nothing else
//! uses the broker (scripts/rust-client.sh under /tmp/mpw-services.lock, as the suite does).
//! Skipped, saying so, when the broker is not the local one or with
//! MPW_RUST_SKIP_BROKER_RESTART=1.

use std::future::IntoFuture;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use matrix_push_worker_client::{ClientOptions, PushRulesClient, TransportFailure};
use tokio::time::Instant;

use crate::support::{
    amqp_url, client, exclusive_broker, new_user, options, repository, UnservedQueue,
};

fn services_script() -> PathBuf {
    repository().join("scripts/services.sh")
}

fn skipped() -> Option<String> {
    if std::env::var("MPW_RUST_SKIP_BROKER_RESTART").as_deref() == Ok("1") {
        return Some("MPW_RUST_SKIP_BROKER_RESTART=1".into());
    }
    let url = url::Url::parse(&amqp_url()).ok()?;
    let local = matches!(url.host_str(), Some("127.0.0.1" | "localhost"))
        && url.port().unwrap_or(5672) == 5672;
    if !local {
        return Some("the broker is not the local one of scripts/services.sh".into());
    }
    None
}

fn services(command: &str) {
    let status = Command::new(services_script())
        .arg(command)
        .env_remove("AMQP_URL")
        .env_remove("MONGODB_URL")
        .status()
        .expect("scripts/services.sh runs");
    assert!(status.success(), "scripts/services.sh {command}: {status}");
}

/// Starts the broker again when the test ends, even failed.
struct StartAgain;

impl Drop for StartAgain {
    fn drop(&mut self) {
        services("start-rabbitmq");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_calls_fail_at_once_and_the_client_serves_again_after_a_restart() {
    if let Some(why) = skipped() {
        // Past libtest's capture, which hides what a passing test prints.
        let _ = writeln!(std::io::stderr(), "broker restart test skipped: {why}");
        return;
    }
    let _alone = exclusive_broker().await;
    let client = client();
    let user = new_user("restart");
    client.get_push_rules(&user).await.unwrap();
    // Calls that stay pending: a queue nobody consumes, on a second client, with a long deadline.
    let queue = UnservedQueue::declare().await;
    let waiting = PushRulesClient::new(ClientOptions {
        queue: queue.name.clone(),
        read_queue: None,
        timeout: Duration::from_secs(60),
        ..options()
    })
    .unwrap();
    let pending: Vec<_> = (0..3)
        .map(|_| tokio::spawn(waiting.get_pushers(&user).into_future()))
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let restart = StartAgain;
    tokio::task::spawn_blocking(|| services("stop-rabbitmq"))
        .await
        .unwrap();
    for call in pending {
        let failed = call.await.unwrap().unwrap_err();
        // Not `timeout`: they failed with the lost connection, not at their deadline.
        assert_eq!(failed.reason(), Some(TransportFailure::ConnectionLost));
    }
    tokio::task::spawn_blocking(move || drop(restart))
        .await
        .unwrap();

    // The same client, once the broker and the worker are back.
    let deadline = Instant::now() + Duration::from_secs(90);
    let answer = loop {
        let call = client
            .get_push_rule_enabled(&user, "global", "override", ".m.rule.master")
            .timeout(Duration::from_secs(3));
        match call.await {
            Ok(answer) => break answer,
            Err(error) if Instant::now() < deadline => {
                eprintln!("not served yet after the restart: {error}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => panic!("not served 90 s after the restart: {error}"),
        }
    };
    assert!(!answer.enabled);
    client
        .set_push_rule_enabled(&user, "global", "override", ".m.rule.master", true)
        .await
        .unwrap();
    waiting.close().await;
    queue.delete().await;
}
