//! `/healthz` for the kubelet's probes: a process that answers is alive.
//! Stream health (lag, headroom, liveness of batches) is judged by the
//! operator from `status.progress`, because a stuck worker cannot judge
//! itself reliably.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Answers `200 ok` to `GET /healthz` and `404` to anything else, until the
/// task is dropped.
pub async fn serve_healthz(listener: TcpListener) {
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let mut request = [0u8; 1024];
            let Ok(read) = socket.read(&mut request).await else {
                return;
            };
            let line = String::from_utf8_lossy(&request[..read]);
            let healthz = line.starts_with("GET /healthz ") || line.starts_with("GET /healthz?");
            let response: &[u8] = if healthz {
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\nconnection: close\r\n\r\nok\n"
            } else {
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            };
            let _ = socket.write_all(response).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpStream;

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut socket = TcpStream::connect(addr).await.unwrap();
        socket
            .write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut answer = String::new();
        socket.read_to_string(&mut answer).await.unwrap();
        answer
    }

    #[tokio::test]
    async fn healthz_answers_ok_and_nothing_else() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve_healthz(listener));
        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200 OK"));
        assert!(get(addr, "/other").await.starts_with("HTTP/1.1 404"));
        server.abort();
    }
}
