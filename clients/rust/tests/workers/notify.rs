//! notify hands a notification to the workers, who push it to the recipient's gateway.

use std::time::Duration;

use matrix_push_worker_client::{Counts, Notification, NotifyRecipient, NotifyReply, PushAction};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::pushers::http_pusher;
use crate::support::{client, new_user, shared_broker};

/// A push gateway on 127.0.0.1 that accepts every notification and hands it to the test.
struct PushGateway {
    url: String,
    received: mpsc::UnboundedReceiver<Value>,
}

impl PushGateway {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/_matrix/push/v1/notify",
            listener.local_addr().unwrap()
        );
        let (sender, received) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let sender = sender.clone();
                tokio::spawn(async move {
                    let mut socket = BufReader::new(socket);
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if socket.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':') {
                            if name.eq_ignore_ascii_case("content-length") {
                                length = value.trim().parse().unwrap_or(0);
                            }
                        }
                    }
                    let mut body = vec![0; length];
                    if socket.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    let _ = sender.send(serde_json::from_slice(&body).unwrap_or(Value::Null));
                    let answer = br#"{"rejected":[]}"#;
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
                        answer.len()
                    );
                    let mut socket = socket.into_inner();
                    let _ = socket.write_all(head.as_bytes()).await;
                    let _ = socket.write_all(answer).await;
                });
            }
        });
        Self { url, received }
    }

    async fn next(&mut self) -> Value {
        tokio::time::timeout(Duration::from_secs(30), self.received.recv())
            .await
            .expect("a push within 30 s")
            .expect("the gateway runs")
    }
}

fn message(event_id: &str) -> Notification {
    Notification {
        event_id: Some(event_id.into()),
        room_id: Some("!room:example.org".into()),
        event_type: Some("m.room.message".into()),
        sender: Some("@alice:example.org".into()),
        content: Some(serde_json::from_str(r#"{"msgtype": "m.text", "body": "hi"}"#).unwrap()),
        ..Notification::default()
    }
}

#[tokio::test]
async fn notify_reaches_the_recipients_gateway_once_per_message_id() {
    let _broker = shared_broker().await;
    let client = client();
    let mut gateway = PushGateway::start().await;
    let bob = new_user("bob");
    client
        .set_pusher(
            &bob,
            &http_pusher(&format!("{bob}-phone"), &gateway.url),
            Some("PHONE"),
        )
        .await
        .unwrap();
    let recipients = [NotifyRecipient {
        actions: Some(vec![PushAction::Notify]),
        counts: Some(Counts {
            unread: Some(1),
            ..Counts::default()
        }),
        ..NotifyRecipient::new(&bob)
    }];
    let taken_in = NotifyReply {
        recipients: 1,
        devices: 1,
        pending: None,
        extra: Default::default(),
    };

    let answer = client
        .notify(&message("$first"), &recipients)
        .with_reply()
        .await
        .unwrap();
    assert_eq!(answer, taken_in);
    let first = gateway.next().await;
    assert_eq!(first["notification"]["event_id"], "$first");
    assert_eq!(
        first["notification"]["devices"][0]["pushkey"],
        format!("{bob}-phone")
    );
    assert_eq!(first["notification"]["counts"]["unread"], 1);

    // Resolved on the broker's confirm.
    client
        .notify(&message("$second"), &recipients)
        .await
        .unwrap();
    assert_eq!(gateway.next().await["notification"]["event_id"], "$second");

    // The same message_id again schedules nothing twice, and gets the first answer.
    let id = format!("n-3-{bob}");
    let again = client
        .notify(&message("$third"), &recipients)
        .message_id(&id)
        .with_reply()
        .await
        .unwrap();
    let repeat = client
        .notify(&message("$third"), &recipients)
        .with_reply()
        .message_id(&id)
        .await
        .unwrap();
    assert_eq!((&again, &repeat), (&taken_in, &taken_in));
    assert_eq!(gateway.next().await["notification"]["event_id"], "$third");
    // One device's pushes go in publish order: a second $third would come before $fourth.
    client
        .notify(&message("$fourth"), &recipients)
        .with_reply()
        .await
        .unwrap();
    assert_eq!(gateway.next().await["notification"]["event_id"], "$fourth");
}
