//! The transport: deadlines, unroutable requests, many calls on one connection, several nodes,
//! the read queue, closing.

use std::future::IntoFuture;
use std::time::Duration;

use matrix_push_worker_client::{
    ClientOptions, ErrorKind, NewPushRule, PushAction, PushRulesClient, PushRulesError,
    TransportFailure,
};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::support::{
    amqp_url, client, known_user, new_user, options, shared_broker, UnservedQueue,
};

fn reason(error: &PushRulesError) -> Option<TransportFailure> {
    error.reason()
}

#[tokio::test]
async fn a_call_with_no_reply_fails_at_its_deadline() {
    let _broker = shared_broker().await;
    let queue = UnservedQueue::declare().await;
    let client = PushRulesClient::new(ClientOptions {
        queue: queue.name.clone(),
        read_queue: None,
        ..options()
    })
    .unwrap();
    let started = Instant::now();

    let failed = client
        .get_push_rules(&new_user("timeout"))
        .timeout(Duration::from_millis(500))
        .await
        .unwrap_err();

    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_eq!(reason(&failed), Some(TransportFailure::Timeout));
    assert_eq!(
        (failed.kind(), failed.status(), failed.errcode()),
        (ErrorKind::Unavailable, 503, "M_UNKNOWN")
    );
    queue.delete().await;
}

#[tokio::test]
async fn a_request_no_queue_takes_fails_as_unroutable() {
    let _broker = shared_broker().await;
    let client = PushRulesClient::new(ClientOptions {
        queue: format!("rsclient.absent.{:08x}", fastrand::u32(..)),
        read_queue: None,
        ..options()
    })
    .unwrap();

    let failed = client
        .set_push_rule_enabled(
            &new_user("nobody"),
            "global",
            "override",
            ".m.rule.master",
            true,
        )
        .await
        .unwrap_err();

    assert_eq!(reason(&failed), Some(TransportFailure::Unroutable));
}

#[tokio::test]
async fn reads_go_to_the_request_queue_while_the_read_queue_is_not_there() {
    let _broker = shared_broker().await;
    // A read queue no worker declared: the broker returns the read, which goes to the request
    // queue; the next ones go there straight.
    let client = PushRulesClient::new(ClientOptions {
        read_queue: Some(format!("rsclient.absent.{:08x}", fastrand::u32(..))),
        ..options()
    })
    .unwrap();
    let user = new_user("fallback");

    for _ in 0..3 {
        client.get_pushers(&user).await.unwrap();
    }
}

#[tokio::test]
async fn many_calls_in_parallel_share_one_connection_and_each_gets_its_own_reply() {
    let _broker = shared_broker().await;
    let client = client();
    let users: Vec<String> = (0..40)
        .map(|index| new_user(&format!("parallel{index}")))
        .collect();
    let mut writes = JoinSet::new();
    for (index, user) in users.iter().enumerate() {
        let (client, user) = (client.clone(), user.clone());
        writes.spawn(async move {
            client.get_push_rules(&user).await.unwrap();
            let rule = NewPushRule {
                pattern: Some(format!("word{index}")),
                actions: vec![PushAction::Notify],
                ..NewPushRule::default()
            };
            client
                .set_push_rule(&user, "global", "content", "mine", &rule)
                .await
                .unwrap();
            let stored = client
                .get_push_rule(&user, "global", "content", "mine")
                .await
                .unwrap();
            (index, stored.pattern)
        });
    }
    let node = {
        // The first calls have connected by now or will: all on one node.
        let mut patterns = writes.join_all().await;
        patterns.sort();
        for (index, pattern) in patterns {
            assert_eq!(pattern, Some(format!("word{index}")));
        }
        client.broker().expect("connected")
    };
    let readers = users
        .iter()
        .flat_map(|user| std::iter::repeat_n(user, 5))
        .map(|user| {
            let client = client.clone();
            let user = user.clone();
            async move {
                client
                    .get_push_rule_actions(&user, "global", "content", "mine")
                    .await
            }
        });

    let answers = futures_util::future::join_all(readers).await;

    assert_eq!(answers.len(), 200);
    assert!(answers
        .iter()
        .all(|answer| answer.as_ref().unwrap().actions == [PushAction::Notify]));
    assert_eq!(client.broker(), Some(node));
}

#[tokio::test]
async fn a_node_that_does_not_answer_is_passed_over() {
    let _broker = shared_broker().await;
    // A port nothing listens on: refused at once, and the client goes on to the next node,
    // whichever of the two the shuffled order tries first.
    let live = amqp_url();
    let client = PushRulesClient::new(ClientOptions {
        urls: vec!["amqp://guest:guest@127.0.0.1:1".into(), live.clone()],
        ..options()
    })
    .unwrap();

    for _ in 0..3 {
        client.get_push_rules(&new_user("cluster")).await.unwrap();
    }
    let live = url::Url::parse(&live).unwrap();
    let label = format!(
        "{}:{}",
        live.host_str().unwrap(),
        live.port().unwrap_or(5672)
    );
    assert_eq!(client.broker(), Some(label));
}

#[tokio::test]
async fn closing_fails_the_pending_calls_and_refuses_later_ones() {
    let _broker = shared_broker().await;
    let queue = UnservedQueue::declare().await;
    let client = PushRulesClient::new(ClientOptions {
        queue: queue.name.clone(),
        read_queue: None,
        ..options()
    })
    .unwrap();
    let user = new_user("closing");
    let pending = tokio::spawn(
        client
            .get_pushers(&user)
            .timeout(Duration::from_secs(60))
            .into_future(),
    );
    while client.broker().is_none() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    client.close().await;
    client.close().await;

    let failed = pending.await.unwrap().unwrap_err();
    assert_eq!(reason(&failed), Some(TransportFailure::Closed));
    let later = client.get_pushers(&user).await.unwrap_err();
    assert_eq!(reason(&later), Some(TransportFailure::Closed));
    queue.delete().await;
}

#[tokio::test]
async fn a_message_id_the_broker_cannot_carry_fails_alone_and_nothing_is_sent() {
    let _broker = shared_broker().await;
    let client = client();
    let user = known_user(&client, "long-id").await;

    let refused = client
        .set_push_rule_enabled(&user, "global", "override", ".m.rule.master", true)
        .message_id("x".repeat(256))
        .await
        .unwrap_err();

    assert_eq!(
        (refused.kind(), refused.errcode(), refused.reason()),
        (ErrorKind::BadJson, "M_BAD_JSON", None)
    );
    let master = client
        .get_push_rule_enabled(&user, "global", "override", ".m.rule.master")
        .await
        .unwrap();
    assert!(!master.enabled);
}
