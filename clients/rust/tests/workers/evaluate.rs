//! evaluate and evaluate_many: the default shape whatever the wire form.

use std::collections::HashMap;
use std::time::Duration;

use matrix_push_worker_client::{
    ClientOptions, ErrorKind, EvaluateEvent, Event, JsonObject, NewPushRule, PushAction,
    PushCondition, PushRulesClient, Recipient, RecipientsOfServer, Room, TransportFailure,
};
use serde_json::json;

use crate::support::{client, known_user, new_user, options, shared_broker, UnservedQueue};

pub fn room(members: u64) -> Room {
    Room {
        member_count: members,
        sender_power_level: Some(0),
        notification_power_levels: Some([("room".to_owned(), 50)].into()),
        ..Room::default()
    }
}

pub fn message(sender: &str, body: &str) -> Event {
    let content: JsonObject = json!({"msgtype": "m.text", "body": body})
        .as_object()
        .unwrap()
        .clone();
    Event::new("m.room.message", "!room:example.org", sender, content)
}

pub fn notified(users: &[String]) -> HashMap<String, Vec<PushAction>> {
    users
        .iter()
        .map(|user| (user.clone(), vec![PushAction::Notify]))
        .collect()
}

#[tokio::test]
async fn evaluate_names_the_notified_and_their_rule() {
    let _broker = shared_broker().await;
    let client = client();
    let (sender, bob) = (new_user("sender"), new_user("bob"));
    let alice = known_user(&client, "alice").await;
    let silent = NewPushRule {
        pattern: Some("pizza".into()),
        ..NewPushRule::default()
    };
    client
        .set_push_rule(&alice, "global", "content", "kw-pizza", &silent)
        .await
        .unwrap();
    let recipients = [
        Recipient::new(&sender),
        Recipient::new(&alice),
        Recipient::with_display_name(&bob, "Bob"),
    ];

    let answer = client
        .evaluate(&message(&sender, "pizza tonight?"), &room(10), &recipients)
        .explain(true)
        .await
        .unwrap();

    assert_eq!(answer.notify, notified(std::slice::from_ref(&bob)));
    assert_eq!(answer.evaluated, 3);
    let rule_ids = answer.rule_ids.unwrap();
    assert_eq!(rule_ids[&sender], None);
    assert_eq!(rule_ids[&alice].as_deref(), Some("kw-pizza"));
    assert_eq!(rule_ids[&bob].as_deref(), Some(".m.rule.message"));
}

#[tokio::test]
async fn a_large_room_over_several_servers_is_decoded_by_position() {
    let _broker = shared_broker().await;
    let client = client();
    // From 100 recipients they go grouped by server and the reply names them by position in the
    // grouped order, which is not the order given here: the decoding must map positions back.
    let sender = new_user("sender");
    let quiet = known_user(&client, "quiet").await;
    let mute = NewPushRule {
        conditions: Some(vec![]),
        ..NewPushRule::default()
    };
    client
        .set_push_rule(&quiet, "global", "override", "mute", &mute)
        .await
        .unwrap();
    let tag = fastrand::u32(..);
    let crowd: Vec<String> = (0..150)
        .map(|index| format!("@member{index}-{tag:08x}:server{}.example.org", index % 3))
        .collect();
    let mut recipients: Vec<Recipient> = crowd.iter().map(Recipient::new).collect();
    recipients.insert(75, Recipient::new(&quiet));

    let answer = client
        .evaluate(&message(&sender, "hello"), &room(152), &recipients)
        .await
        .unwrap();

    assert_eq!(answer.evaluated, 151);
    assert_eq!(answer.notify, notified(&crowd));
}

#[tokio::test]
async fn recipients_already_grouped_by_server_are_sent_as_given() {
    let _broker = shared_broker().await;
    let client = client();
    let sender = new_user("sender");
    let tag = format!("{:08x}", fastrand::u32(..));
    let [ann, bea, cid] = ["ann", "bea", "cid"].map(|name| format!("{name}-{tag}"));
    // Ann and Bea are called by their display names, each in her own position of the group.
    let by_name = NewPushRule {
        conditions: Some(vec![PushCondition::ContainsDisplayName]),
        actions: vec![PushAction::Notify, PushAction::highlight(true)],
        ..NewPushRule::default()
    };
    for localpart in [&ann, &bea] {
        let user = format!("@{localpart}:one.example.org");
        client.get_push_rules(&user).await.unwrap();
        client
            .set_push_rule(&user, "global", "override", "by-name", &by_name)
            .await
            .unwrap();
    }
    let groups = [
        RecipientsOfServer {
            server: "one.example.org".into(),
            localparts: vec![ann.clone(), bea.clone()],
            display_names: Some(vec![Some("Annabel".into()), Some("Beatrix".into())]),
            extra: Default::default(),
        },
        RecipientsOfServer {
            server: "two.example.org".into(),
            localparts: vec![cid.clone()],
            display_names: None,
            extra: Default::default(),
        },
    ];

    let answer = client
        .evaluate(&message(&sender, "hi Annabel"), &room(4), &groups)
        .explain(true)
        .await
        .unwrap();

    let ann = format!("@{ann}:one.example.org");
    let bea = format!("@{bea}:one.example.org");
    let cid = format!("@{cid}:two.example.org");
    assert_eq!(answer.evaluated, 3);
    let rule_ids = answer.rule_ids.unwrap();
    assert_eq!(rule_ids[&ann].as_deref(), Some("by-name"));
    assert_eq!(rule_ids[&bea].as_deref(), Some(".m.rule.message"));
    assert_eq!(answer.notify[&ann], by_name.actions);
    assert_eq!(answer.notify[&bea], [PushAction::Notify]);
    assert_eq!(answer.notify[&cid], [PushAction::Notify]);
}

#[tokio::test]
async fn evaluate_many_answers_each_event_on_its_own() {
    let _broker = shared_broker().await;
    let client = client();
    let (sender, bob) = (new_user("sender"), new_user("bob"));
    let (one, two) = (message(&sender, "one"), message(&sender, "two"));
    let good = [Recipient::new(&bob)];
    let bad = [Recipient::new("not a user")];
    let room = room(10);
    let calls = [
        EvaluateEvent {
            event: &one,
            room: &room,
            recipients: (&good).into(),
            explain: false,
        },
        EvaluateEvent {
            event: &two,
            room: &room,
            recipients: (&bad).into(),
            explain: false,
        },
        EvaluateEvent {
            event: &one,
            room: &room,
            recipients: (&good).into(),
            explain: true,
        },
    ];

    let answers = client.evaluate_many(&calls).await;

    let first = answers[0].as_ref().unwrap();
    assert_eq!(
        (
            first.notify.clone(),
            first.evaluated,
            first.rule_ids.clone()
        ),
        (notified(std::slice::from_ref(&bob)), 1, None)
    );
    let refused = answers[1].as_ref().unwrap_err();
    assert_eq!(
        (refused.kind(), refused.errcode()),
        (ErrorKind::BadJson, "M_BAD_JSON")
    );
    assert!(
        refused.error().contains("recipients.0.user_id"),
        "{}",
        refused.error()
    );
    let explained = answers[2].as_ref().unwrap();
    assert_eq!(
        explained.rule_ids.as_ref().unwrap()[&bob].as_deref(),
        Some(".m.rule.message")
    );
}

#[tokio::test]
async fn evaluate_many_splits_a_long_batch_into_messages_and_keeps_the_order() {
    let _broker = shared_broker().await;
    let client = client();
    let sender = new_user("sender");
    let room = room(10);
    let users: Vec<String> = (0..70)
        .map(|index| new_user(&format!("u{index}")))
        .collect();
    let events: Vec<Event> = (0..70)
        .map(|index| message(&sender, &format!("event {index}")))
        .collect();
    let recipients: Vec<[Recipient; 1]> = users.iter().map(|user| [Recipient::new(user)]).collect();
    let calls: Vec<EvaluateEvent<'_>> = events
        .iter()
        .zip(&recipients)
        .map(|(event, recipients)| EvaluateEvent {
            event,
            room: &room,
            recipients: recipients.into(),
            explain: false,
        })
        .collect();

    let answers = client.evaluate_many(&calls).await;

    assert_eq!(answers.len(), 70);
    for (answer, user) in answers.iter().zip(&users) {
        assert_eq!(
            answer.as_ref().unwrap().notify,
            notified(std::slice::from_ref(user))
        );
    }
}

#[tokio::test]
async fn a_bad_evaluate_is_the_workers_matrix_error() {
    let _broker = shared_broker().await;
    let client = client();
    let mut event = message(&new_user("sender"), "x");
    event.state_key = Some("".into());
    let recipients = [
        Recipient::new("@a:example.org"),
        Recipient::new("@a:example.org"),
    ];

    let refused = client
        .evaluate(&event, &room(2), &recipients)
        .await
        .unwrap_err();

    assert_eq!(
        (refused.kind(), refused.status()),
        (ErrorKind::BadJson, 400)
    );
    assert!(refused.error().contains("repeats"), "{}", refused.error());
}

#[tokio::test]
async fn a_batch_refused_as_a_whole_for_its_size_is_sent_again_event_by_event() {
    let _broker = shared_broker().await;
    let client = client();
    let sender = new_user("sender");
    let room = room(20_000);
    // 15,000 recipients each: one message of the batch form (well under 1 MiB grouped by server),
    // past the workers' 20,000 recipients over all its events, but each event within them alone.
    let tag = fastrand::u32(..);
    let crowds: Vec<Vec<Recipient>> = (0..2)
        .map(|crowd| {
            (0..15_000)
                .map(|index| Recipient::new(format!("@m{index}-{crowd}-{tag:08x}:example.org")))
                .collect()
        })
        .collect();
    let events = [message(&sender, "one"), message(&sender, "two")];
    let calls: Vec<EvaluateEvent<'_>> = events
        .iter()
        .zip(&crowds)
        .map(|(event, crowd)| EvaluateEvent {
            event,
            room: &room,
            recipients: crowd.into(),
            explain: false,
        })
        .collect();

    let answers = client.evaluate_many(&calls).await;

    for (answer, crowd) in answers.iter().zip(&crowds) {
        let answer = answer.as_ref().unwrap();
        assert_eq!(answer.evaluated, 15_000);
        assert_eq!(answer.notify.len(), 15_000);
        assert!(answer.notify.contains_key(&crowd[14_999].user_id));
    }
}

#[tokio::test]
async fn evaluate_many_without_a_reply_fails_each_event_with_the_reason() {
    let _broker = shared_broker().await;
    let queue = UnservedQueue::declare().await;
    let client = PushRulesClient::new(ClientOptions {
        evaluate_queue: queue.name.clone(),
        ..options()
    })
    .unwrap();
    let sender = new_user("sender");
    let (event, room, recipients) = (
        message(&sender, "x"),
        room(2),
        [Recipient::new(new_user("a"))],
    );
    let call = EvaluateEvent {
        event: &event,
        room: &room,
        recipients: (&recipients).into(),
        explain: false,
    };

    let answers = client
        .evaluate_many(&[call, call])
        .timeout(Duration::from_millis(300))
        .await;

    assert_eq!(answers.len(), 2);
    for answer in answers {
        assert_eq!(
            answer.unwrap_err().reason(),
            Some(TransportFailure::Timeout)
        );
    }
    queue.delete().await;
}
