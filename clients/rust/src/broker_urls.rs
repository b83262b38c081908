//! The nodes of `urls`: one URL, several comma-separated, or a list.

use std::fmt;

use lapin::uri::{AMQPAuthority, AMQPQueryString, AMQPScheme, AMQPUri, AMQPUserInfo};
use url::Url;

/// One node: where to connect, and a label safe to log.
#[derive(Clone)]
pub(crate) struct BrokerAddress {
    /// With its credentials: never log it.
    pub uri: AMQPUri,
    /// `host:port`.
    pub label: String,
}

/// The client's options cannot make a client. Its message names a URL by its position, never by
/// its text (it may carry a password).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidOptions(pub String);

impl fmt::Display for InvalidOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidOptions {}

/// Each entry of `urls` may itself hold several comma-separated URLs.
pub(crate) fn parse_broker_urls(
    urls: &[String],
    heartbeat_seconds: u16,
) -> Result<Vec<BrokerAddress>, InvalidOptions> {
    let entries: Vec<&str> = urls
        .iter()
        .flat_map(|entry| entry.split(','))
        .map(str::trim)
        .collect();
    if entries.iter().all(|entry| entry.is_empty()) {
        return Err(InvalidOptions("no broker URL is given".into()));
    }
    let mut addresses: Vec<BrokerAddress> = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let address = parse_one(entry, heartbeat_seconds)
            .map_err(|why| InvalidOptions(format!("broker URL #{} {why}", index + 1)))?;
        if addresses.iter().any(|known| known.label == address.label) {
            return Err(InvalidOptions(format!(
                "broker {} is listed twice",
                address.label
            )));
        }
        addresses.push(address);
    }
    Ok(addresses)
}

fn parse_one(entry: &str, heartbeat_seconds: u16) -> Result<BrokerAddress, &'static str> {
    if entry.is_empty() {
        return Err("is empty");
    }
    if entry.contains(char::is_whitespace) {
        return Err("contains a space: give each node as a URL of its own");
    }
    let url = Url::parse(entry).map_err(|_| "is not a URL")?;
    let scheme = match url.scheme() {
        "amqp" => AMQPScheme::AMQP,
        "amqps" if cfg!(feature = "rustls") => AMQPScheme::AMQPS,
        "amqps" => return Err("is amqps://: build the client with its `rustls` feature"),
        _ => return Err("must start with amqp:// or amqps://"),
    };
    let host = url
        .host_str()
        .filter(|host| !host.is_empty())
        .ok_or("names no host")?;
    // An IPv6 address without its brackets, as a socket address takes it.
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = url.port().unwrap_or(scheme.default_port());
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .map(|decoded| decoded.into_owned())
            .map_err(|_| "is not valid UTF-8 once decoded")
    };
    let username = match url.username() {
        "" => "guest".to_owned(),
        name => decode(name)?,
    };
    let password = match url.password() {
        None => "guest".to_owned(),
        Some(password) => decode(password)?,
    };
    // As the AMQP URI spec has it: no path is the vhost "/", a path "/name" the vhost "name".
    let vhost = match url.path() {
        "" => "/".to_owned(),
        path => decode(&path[1..])?,
    };
    let mut query = AMQPQueryString {
        heartbeat: Some(heartbeat_seconds),
        ..AMQPQueryString::default()
    };
    for (key, value) in url.query_pairs() {
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| "has a query value that is not a number")
        };
        match key.as_ref() {
            "heartbeat" => {
                query.heartbeat =
                    Some(u16::try_from(number()?).map_err(|_| "has a heartbeat too large")?)
            }
            "frame_max" => {
                query.frame_max =
                    Some(u32::try_from(number()?).map_err(|_| "has a frame_max too large")?)
            }
            "channel_max" => {
                query.channel_max =
                    Some(u16::try_from(number()?).map_err(|_| "has a channel_max too large")?)
            }
            "connection_timeout" => query.connection_timeout = Some(number()?),
            _ => {}
        }
    }
    let label = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    Ok(BrokerAddress {
        uri: AMQPUri {
            scheme,
            authority: AMQPAuthority {
                userinfo: AMQPUserInfo { username, password },
                host,
                port,
            },
            vhost,
            query,
        },
        label,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(urls: &[&str]) -> Result<Vec<BrokerAddress>, InvalidOptions> {
        let urls: Vec<String> = urls.iter().map(|url| (*url).to_owned()).collect();
        parse_broker_urls(&urls, 10)
    }

    #[test]
    fn nodes_come_from_a_list_or_comma_separated_with_their_credentials_and_vhost() {
        let nodes = parse(&[
            "amqp://user:p%40ss@10.0.0.5:5673/prod, amqp://rabbit-b",
            "amqp://[::1]/",
        ])
        .unwrap();

        let labels: Vec<&str> = nodes.iter().map(|node| node.label.as_str()).collect();
        assert_eq!(labels, ["10.0.0.5:5673", "rabbit-b:5672", "[::1]:5672"]);
        let first = &nodes[0].uri;
        assert_eq!(first.authority.host, "10.0.0.5");
        assert_eq!(first.authority.userinfo.username, "user");
        assert_eq!(first.authority.userinfo.password, "p@ss");
        assert_eq!(first.vhost, "prod");
        assert_eq!(first.query.heartbeat, Some(10));
        assert_eq!(nodes[1].uri.vhost, "/");
        assert_eq!(nodes[1].uri.authority.userinfo.username, "guest");
        assert_eq!(nodes[2].uri.authority.host, "::1");
        assert_eq!(nodes[2].uri.vhost, "");
    }

    #[test]
    fn bad_urls_are_named_by_position_and_never_echoed() {
        let cases: [(&[&str], &str); 7] = [
            (&[], "no broker URL is given"),
            (&[" , "], "no broker URL is given"),
            (&["amqp://a, "], "broker URL #2 is empty"),
            (
                &["amqp://a", "http://secret@b"],
                "broker URL #2 must start with amqp:// or amqps://",
            ),
            (
                &["amqp://a", "amqp://b secret"],
                "broker URL #2 contains a space: give each node as a URL of its own",
            ),
            (
                &["amqp://u:secret@a", "amqp://a:5672"],
                "broker a:5672 is listed twice",
            ),
            (
                &["amqp://a?heartbeat=x"],
                "broker URL #1 has a query value that is not a number",
            ),
        ];
        for (urls, message) in cases {
            assert_eq!(
                parse(urls).err(),
                Some(InvalidOptions(message.into())),
                "{urls:?}"
            );
        }
    }
}
