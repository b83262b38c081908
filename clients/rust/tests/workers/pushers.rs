//! Pushers, and the homeserver ops that remove them.

use std::collections::BTreeSet;

use matrix_push_worker_client::{ErrorKind, PushRulesClient, PusherSelector, PusherSetAction};
use serde_json::json;

use crate::support::{client, known_user, new_user, options, shared_broker};

pub fn http_pusher(pushkey: &str, url: &str) -> PusherSetAction {
    PusherSetAction {
        pushkey: Some(pushkey.into()),
        kind: Some(Some("http".into())),
        app_id: Some("org.example.app".into()),
        app_display_name: Some("Example".into()),
        device_display_name: Some("Phone".into()),
        lang: Some("en".into()),
        data: Some(json!({"url": url}).as_object().unwrap().clone()),
        ..PusherSetAction::default()
    }
}

const GATEWAY: &str = "https://push.example.org/_matrix/push/v1/notify";

#[tokio::test]
async fn a_pusher_is_set_listed_with_its_device_and_deleted_by_device() {
    let _broker = shared_broker().await;
    let client = client();
    let user = new_user("pushers");
    // A pushkey set for one user leaves every other user (`append` false): each test its own.
    let (phone, laptop) = (format!("{user}-phone"), format!("{user}-laptop"));
    client
        .set_pusher(&user, &http_pusher(&phone, GATEWAY), Some("PHONE"))
        .await
        .unwrap();
    client
        .set_pusher(&user, &http_pusher(&laptop, GATEWAY), Some("LAPTOP"))
        .await
        .unwrap();

    let pushers = client.get_pushers(&user).await.unwrap().pushers;
    let listed: BTreeSet<(&str, Option<&str>)> = pushers
        .iter()
        .map(|p| (p.pushkey.as_str(), p.device_id.as_deref()))
        .collect();
    assert_eq!(
        listed,
        BTreeSet::from([
            (phone.as_str(), Some("PHONE")),
            (laptop.as_str(), Some("LAPTOP"))
        ])
    );
    assert!(pushers
        .iter()
        .all(|p| p.enabled && p.msc3881_enabled && p.kind == "http"));
    assert_eq!(pushers[0].data["url"], GATEWAY);

    let deleted = client
        .delete_pushers(&user, PusherSelector::DeviceIds(vec!["PHONE".into()]))
        .await
        .unwrap();
    assert_eq!(deleted.deleted, 1);
    let left = client.get_pushers(&user).await.unwrap().pushers;
    assert_eq!(
        left.iter().map(|p| p.pushkey.as_str()).collect::<Vec<_>>(),
        [laptop.as_str()]
    );

    let deleted = client
        .delete_pushers(&user, PusherSelector::ExceptDeviceId("OTHER".into()))
        .message_id(format!("except-{user}"))
        .await
        .unwrap();
    assert_eq!(deleted.deleted, 1);
    assert!(client.get_pushers(&user).await.unwrap().pushers.is_empty());
}

#[tokio::test]
async fn delete_pushers_all_and_delete_user_data() {
    let _broker = shared_broker().await;
    let client = client();
    let user = known_user(&client, "deactivated").await;
    let key = |name: &str| format!("{user}-{name}");
    client
        .set_pusher(&user, &http_pusher(&key("phone"), GATEWAY), Some("PHONE"))
        .await
        .unwrap();
    let deleted = client
        .delete_pushers(&user, PusherSelector::All)
        .include_email(true)
        .await
        .unwrap();
    assert_eq!(deleted.deleted, 1);

    client
        .set_pusher(&user, &http_pusher(&key("laptop"), GATEWAY), None)
        .await
        .unwrap();
    let rule = matrix_push_worker_client::NewPushRule {
        pattern: Some("x".into()),
        ..Default::default()
    };
    client
        .set_push_rule(&user, "global", "content", "mine", &rule)
        .await
        .unwrap();

    client.delete_user_data(&user).await.unwrap();

    assert!(client.get_pushers(&user).await.unwrap().pushers.is_empty());
    let rules = client.get_push_rules(&user).await.unwrap();
    assert!(rules.global.content.iter().all(|rule| rule.default));
}

#[tokio::test]
async fn a_pusher_with_fields_missing_is_named_by_the_workers() {
    let _broker = shared_broker().await;
    let client = client();
    let action = PusherSetAction {
        pushkey: Some("key".into()),
        ..PusherSetAction::default()
    };

    let refused = client
        .set_pusher(&new_user("partial"), &action, None)
        .await
        .unwrap_err();

    assert_eq!(
        (refused.kind(), refused.errcode(), refused.status()),
        (ErrorKind::MissingParam, "M_MISSING_PARAM", 400)
    );
    assert!(refused.error().contains("app_id"), "{}", refused.error());
}

#[tokio::test]
async fn workers_with_trusted_publishers_refuse_a_client_without_its_user() {
    let _broker = shared_broker().await;
    // No user_id on its requests: the workers trust only the publisher's.
    let untrusted = PushRulesClient::new(matrix_push_worker_client::ClientOptions {
        publisher_user_id: None,
        ..options()
    })
    .unwrap();
    let user = new_user("untrusted");

    let homeserver_op = untrusted.delete_user_data(&user).await.unwrap_err();
    let user_op = untrusted.get_pushers(&user).await.unwrap_err();

    for refused in [homeserver_op, user_op] {
        assert_eq!(
            (
                refused.kind(),
                refused.errcode(),
                refused.status(),
                refused.reason()
            ),
            (ErrorKind::Forbidden, "M_FORBIDDEN", 403, None)
        );
    }
}
