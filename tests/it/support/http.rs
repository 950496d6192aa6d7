//! Plain HTTP/1 on 127.0.0.1 for the tests: free ports for servers started
//! as processes, and GET against their endpoints.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A port nobody listens on right now (the OS picks it).
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// `GET path` on `addr`, bounded in time; the status line and body.
pub async fn http_get(addr: SocketAddr, path: &str) -> (String, String) {
    try_http_get(addr, path)
        .await
        .unwrap_or_else(|| panic!("nothing listens on {addr}"))
}

/// [`http_get`], or `None` while nothing listens on `addr` yet (a server
/// process still starting).
pub async fn try_http_get(addr: SocketAddr, path: &str) -> Option<(String, String)> {
    let exchange = async {
        let mut socket = tokio::net::TcpStream::connect(addr).await.ok()?;
        socket
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .expect("request");
        let mut response = String::new();
        socket
            .read_to_string(&mut response)
            .await
            .expect("response");
        Some(response)
    };
    let response = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .expect("the endpoint answers in time")?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    Some((
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    ))
}
