//! A TCP proxy on 127.0.0.1 whose connections a test can cut, to play a
//! network failure between the engine and SQL Server, and whose
//! server-to-client direction a test can throttle, to play a slow link or
//! a slow client, and which can refuse every connection for a while, to
//! play a server that is down.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinHandle;

/// The proxy's receive buffer towards the server, small so that a
/// throttled link pushes back on the server quickly.
const SERVER_SIDE_RECV_BUFFER: u32 = 64 * 1024;

pub struct CuttableProxy {
    pub addr: SocketAddr,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
    rate: Arc<AtomicU64>,
    refusing: Arc<AtomicBool>,
    accepted: Arc<AtomicU64>,
}

impl CuttableProxy {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy binds");
        let addr = listener.local_addr().expect("proxy address");
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let rate = Arc::new(AtomicU64::new(0));
        let refusing = Arc::new(AtomicBool::new(false));
        let accepted_count = Arc::new(AtomicU64::new(0));
        let accepted = links.clone();
        let link_rate = rate.clone();
        let (refuse, count) = (refusing.clone(), accepted_count.clone());
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                if refuse.load(Ordering::SeqCst) {
                    // Closed at once, as a server that is going down does.
                    drop(client);
                    continue;
                }
                let rate = link_rate.clone();
                let link = tokio::spawn(async move {
                    if let Ok(server) = connect(target).await {
                        relay(client, server, rate).await;
                    }
                });
                accepted.lock().expect("links").push(link);
            }
        });
        CuttableProxy {
            addr,
            links,
            accept,
            rate,
            refusing,
            accepted: accepted_count,
        }
    }

    /// While `refuse`, cuts every open connection and closes each new one
    /// at once: the server looks down to every client.
    pub fn refuse(&self, refuse: bool) {
        self.refusing.store(refuse, Ordering::SeqCst);
        if refuse {
            self.cut();
        }
    }

    /// Connections clients opened so far, refused ones included.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Drops every open connection (new ones are still accepted).
    pub fn cut(&self) {
        for link in self.links.lock().expect("links").drain(..) {
            link.abort();
        }
    }

    /// Passes at most `bytes_per_second` from the server to the client
    /// (`None`: as fast as possible), on open and new connections.
    pub fn throttle(&self, bytes_per_second: Option<u64>) {
        self.rate
            .store(bytes_per_second.unwrap_or(0), Ordering::SeqCst);
    }
}

async fn connect(target: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = match target {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_recv_buffer_size(SERVER_SIDE_RECV_BUFFER)?;
    let stream = socket.connect(target).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Copies both ways until either side closes; the server's bytes go
/// through at the current rate limit.
async fn relay(client: TcpStream, server: TcpStream, rate: Arc<AtomicU64>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upstream = tokio::io::copy(&mut client_read, &mut server_write);
    let downstream = async {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let n = match server_read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if client_write.write_all(&buffer[..n]).await.is_err() {
                return;
            }
            let limit = rate.load(Ordering::SeqCst);
            if limit > 0 {
                tokio::time::sleep(Duration::from_secs_f64(n as f64 / limit as f64)).await;
            }
        }
    };
    tokio::select! {
        _ = upstream => {}
        () = downstream => {}
    }
}

impl Drop for CuttableProxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}
