//! The byte stream under the TDS packets: a TCP socket that measures how
//! long writes were blocked (network wait), optionally wrapped in TLS.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use super::tls::PreloginFramed;

/// Accumulated time writes spent blocked on socket back-pressure.
#[derive(Debug, Clone, Default)]
pub(crate) struct WaitMeter(Arc<AtomicU64>);

impl WaitMeter {
    fn add(&self, waited: Duration) {
        let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Returns the time accumulated since the last call and resets it.
    pub(crate) fn take(&self) -> Duration {
        Duration::from_nanos(self.0.swap(0, Ordering::Relaxed))
    }
}

/// A TCP stream whose write side records the time between a write (or
/// flush) first returning `Pending` - the kernel send buffer is full because
/// the client is not reading - and the moment it completes.
pub(crate) struct Metered {
    inner: TcpStream,
    meter: WaitMeter,
    blocked_since: Option<Instant>,
}

impl Metered {
    pub(crate) fn new(inner: TcpStream, meter: WaitMeter) -> Self {
        Self {
            inner,
            meter,
            blocked_since: None,
        }
    }

    /// Peeks at the first bytes without consuming them.
    pub(crate) async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.peek(buf).await
    }

    fn track<T>(&mut self, poll: Poll<T>) -> Poll<T> {
        match &poll {
            Poll::Pending => {
                self.blocked_since.get_or_insert_with(Instant::now);
            }
            Poll::Ready(_) => {
                if let Some(since) = self.blocked_since.take() {
                    self.meter.add(since.elapsed());
                }
            }
        }
        poll
    }
}

impl AsyncRead for Metered {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Metered {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.track(poll)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.track(poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The connection after the encryption decision: clear text or TLS.
pub(crate) enum Transport {
    Plain(Metered),
    Tls(Box<TlsStream<PreloginFramed<Metered>>>),
}

macro_rules! delegate {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Transport::Plain($s) => {
                let $s = Pin::new($s);
                $e
            }
            Transport::Tls($s) => {
                let $s = Pin::new(&mut **$s);
                $e
            }
        }
    };
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        delegate!(self, s => s.poll_read(cx, buf))
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        delegate!(self, s => s.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, s => s.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, s => s.poll_shutdown(cx))
    }
}
