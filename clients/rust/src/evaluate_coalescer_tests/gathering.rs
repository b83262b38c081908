//! Which calls go together, in which form, and when.

use super::*;

#[tokio::test]
async fn a_call_while_none_is_out_goes_at_once_alone_in_the_single_form() {
    let mut queue = queue(settings());
    let call = queue.call("$a", 2);
    let sent = queue.next().await;
    assert_eq!(sent.body["op"], "evaluate");
    assert_eq!(sent.events(), (vec!["$a".to_owned()], false));
    sent.answer(evaluated("$a"));
    assert_eq!(body_of(call).await, evaluated("$a"));
}

#[tokio::test]
async fn calls_made_while_one_is_out_go_as_one_batch_when_it_is_answered() {
    let mut queue = queue(settings());
    let (first, out) = one_out(&mut queue).await;
    let waiting: Vec<_> = ["$b", "$c", "$d"].map(|e| queue.call(e, 1)).into();
    queue.nothing_sent().await;

    out.answer(evaluated("$first"));
    let batch = queue.next().await;
    let (events, batched) = batch.events();
    assert!(batched);
    assert_eq!(events, ["$b", "$c", "$d"]);
    batch.answer(results(&events));

    assert_eq!(body_of(first).await, evaluated("$first"));
    for (call, event) in waiting.into_iter().zip(["$b", "$c", "$d"]) {
        assert_eq!(body_of(call).await, evaluated(event), "each its own answer");
    }
}

#[tokio::test]
async fn callers_who_call_again_as_soon_as_answered_go_together_again() {
    let mut queue = queue(settings());
    let (_first, out) = one_out(&mut queue).await;
    let callers: Vec<_> = ["$b", "$c"]
        .map(|event| {
            let coalescer = Arc::clone(&queue.coalescer);
            let next = entry(&format!("{event}2"), 1, json!({})).to_string();
            let call = queue.call(event, 1);
            tokio::spawn(async move {
                call.await.unwrap().unwrap();
                let deadline = Instant::now() + Duration::from_secs(10);
                coalescer.evaluate(next.into_bytes(), 1, deadline).await
            })
        })
        .into();
    queue.nothing_sent().await;
    out.answer(evaluated("$first"));
    let batch = queue.next().await;
    let events = batch.events().0;
    batch.answer(results(&events));
    // Not the first of them alone, then the other: the batch held the way until they had called.
    let again = queue.next().await;
    assert_eq!(again.events(), (vec!["$b2".into(), "$c2".into()], true));
    again.answer(results(&["$b2".into(), "$c2".into()]));
    for caller in callers {
        caller.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn calls_waiting_go_window_after_the_first_of_them_while_the_message_is_still_out() {
    let mut queue = queue(EvaluateCoalescing {
        window: Duration::from_millis(50),
        ..settings()
    });
    let (_first, _out) = one_out(&mut queue).await;
    let start = Instant::now();
    let _b = queue.call("$b", 1);
    let _c = queue.call("$c", 1);
    let batch = queue.next().await;
    assert!(start.elapsed() >= Duration::from_millis(50));
    assert_eq!(batch.events(), (vec!["$b".into(), "$c".into()], true));
}

#[tokio::test]
async fn one_waiting_call_goes_in_the_single_form() {
    let mut queue = queue(settings());
    let (_first, out) = one_out(&mut queue).await;
    let _b = queue.call("$b", 1);
    queue.nothing_sent().await;
    out.answer(evaluated("$first"));
    assert_eq!(queue.next().await.events(), (vec!["$b".into()], false));
}

#[tokio::test]
async fn max_events_sends_the_waiting_calls_at_once() {
    let mut queue = queue(EvaluateCoalescing {
        max_events: 3,
        ..settings()
    });
    let (_first, _out) = one_out(&mut queue).await;
    let _calls: Vec<_> = ["$b", "$c", "$d", "$e"].map(|e| queue.call(e, 1)).into();
    let batch = queue.next().await;
    assert_eq!(batch.events().0, ["$b", "$c", "$d"]);
    queue.nothing_sent().await;
}

#[tokio::test]
async fn max_bytes_sends_what_waits_before_an_event_that_would_pass_it() {
    let size = entry("$b", 1, json!({})).to_string().len();
    let mut queue = queue(EvaluateCoalescing {
        max_bytes: 2 * size + size / 2,
        ..settings()
    });
    let (_first, _out) = one_out(&mut queue).await;
    let _b = queue.call("$b", 1);
    let _c = queue.call("$c", 1);
    queue.nothing_sent().await;
    let _d = queue.call("$d", 1);
    assert_eq!(queue.next().await.events().0, ["$b", "$c"]);
    queue.nothing_sent().await;
}

#[tokio::test]
async fn an_event_larger_than_max_bytes_goes_alone_in_the_single_form() {
    let mut queue = queue(EvaluateCoalescing {
        max_bytes: 200,
        ..settings()
    });
    let (_first, _out) = one_out(&mut queue).await;
    let _b = queue.call("$b", 1);
    queue.nothing_sent().await;
    let _large = queue.call("$large", 20);
    assert_eq!(queue.next().await.events(), (vec!["$b".into()], false));
    assert_eq!(queue.next().await.events(), (vec!["$large".into()], false));
}

#[tokio::test]
async fn max_recipients_caps_the_recipients_of_one_message() {
    let mut queue = queue(EvaluateCoalescing {
        max_recipients: 10,
        ..settings()
    });
    let (_first, _out) = one_out(&mut queue).await;
    let _b = queue.call("$b", 4);
    let _c = queue.call("$c", 4);
    queue.nothing_sent().await;
    let _d = queue.call("$d", 4);
    assert_eq!(queue.next().await.events().0, ["$b", "$c"]);
    let _e = queue.call("$e", 6);
    assert_eq!(queue.next().await.events().0, ["$d", "$e"], "10 reached");
}

#[tokio::test]
async fn an_event_nested_deeper_than_max_json_depth_less_two_goes_alone_at_once() {
    let mut queue = queue(EvaluateCoalescing {
        max_json_depth: 6,
        ..settings()
    });
    let (_first, _out) = one_out(&mut queue).await;
    // The entry, the event, its content and two more: 5 levels, past 6 less 2.
    let deep = entry("$deep", 1, json!({"a": {"b": {}}}));
    let _deep = queue.call_json(deep.to_string().into_bytes(), 1, Duration::from_secs(10));
    assert_eq!(queue.next().await.events(), (vec!["$deep".into()], false));
    // 4 levels: it waits for others.
    let _flat = queue.call_json(
        entry("$flat", 1, json!({"a": {}})).to_string().into_bytes(),
        1,
        Duration::from_secs(10),
    );
    queue.nothing_sent().await;
}
