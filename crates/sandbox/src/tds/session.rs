//! The request loop of a logged-in connection (MS-TDS 3.3.5.6 - 3.3.5.10).
//!
//! A reader task keeps reading the socket while a request runs, so an
//! ATTENTION is seen at once: it cancels the running request's token, and
//! the response is cut short at the next token boundary and ended with a
//! DONE carrying DONE_ATTN. Requests run on a blocking thread with the
//! backend session moved in and back out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::error::TdsError;
use super::packet::{Message, PacketWriter, kind, read_message, status};
use super::request::{parse_batch, parse_rpc, parse_transaction_manager};
use super::response::{ResponseEncoder, attention_ack};
use super::stream::{Transport, WaitMeter};
use super::token::{self, RowEncoder, done, tok};
use super::{BackendSession, TdsConfig};
use crate::sql::{CancelToken, Output, Request, SqlError};

/// What the reader task hands to the request loop.
enum Incoming {
    Message(Message),
    Attention,
    Closed(Option<TdsError>),
}

/// State shared between the reader task and the request loop.
#[derive(Default)]
struct Shared {
    /// An ATTENTION arrived and has not been acknowledged yet.
    attention: AtomicBool,
    /// The token of the request running now.
    current: Mutex<Option<CancelToken>>,
}

impl Shared {
    fn current(&self) -> MutexGuard<'_, Option<CancelToken>> {
        self.current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn signal_attention(&self) {
        self.attention.store(true, Ordering::SeqCst);
        self.cancel_current();
    }

    fn cancel_current(&self) {
        if let Some(token) = self.current().as_ref() {
            token.cancel();
        }
    }

    fn begin(&self, token: &CancelToken) {
        *self.current() = Some(token.clone());
        if self.attention.load(Ordering::SeqCst) {
            token.cancel();
        }
    }

    fn end(&self) {
        *self.current() = None;
    }

    /// Consumes a pending ATTENTION; the caller owes the client a DONE_ATTN.
    fn take_attention(&self) -> bool {
        self.attention.swap(false, Ordering::SeqCst)
    }
}

async fn reader_loop(
    mut rd: ReadHalf<Transport>,
    tx: mpsc::Sender<Incoming>,
    shared: Arc<Shared>,
    max: usize,
) {
    loop {
        let incoming = match read_message(&mut rd, max).await {
            Ok(Some(msg)) if msg.ty == kind::ATTENTION => {
                tracing::debug!("ATTENTION received");
                shared.signal_attention();
                Incoming::Attention
            }
            Ok(Some(msg)) => Incoming::Message(msg),
            Ok(None) => Incoming::Closed(None),
            Err(e) => Incoming::Closed(Some(e)),
        };
        let closed = matches!(incoming, Incoming::Closed(_));
        if closed {
            // The client is gone: stop whatever runs for it.
            shared.cancel_current();
        }
        if tx.send(incoming).await.is_err() || closed {
            return;
        }
    }
}

/// How the loop goes on after a message.
#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Close,
}

/// A logged-in connection.
pub(crate) struct Session<S: BackendSession> {
    session: Option<S>,
    wr: WriteHalf<Transport>,
    writer: PacketWriter,
    meter: WaitMeter,
    config: Arc<TdsConfig>,
    shared: Arc<Shared>,
    rx: mpsc::Receiver<Incoming>,
    reader: JoinHandle<()>,
}

impl<S: BackendSession> Session<S> {
    pub(crate) fn start(
        session: S,
        rd: ReadHalf<Transport>,
        wr: WriteHalf<Transport>,
        writer: PacketWriter,
        meter: WaitMeter,
        config: Arc<TdsConfig>,
    ) -> Self {
        let shared = Arc::new(Shared::default());
        let (tx, rx) = mpsc::channel(8);
        let reader = tokio::spawn(reader_loop(rd, tx, shared.clone(), config.max_message_size));
        Self {
            session: Some(session),
            wr,
            writer,
            meter,
            config,
            shared,
            rx,
            reader,
        }
    }

    /// Serves requests until the client leaves, a fatal error, or shutdown.
    pub(crate) async fn run(
        &mut self,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<(), TdsError> {
        loop {
            let incoming = tokio::select! {
                incoming = self.rx.recv() => incoming,
                _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
            };
            match incoming {
                None | Some(Incoming::Closed(None)) => return Ok(()),
                Some(Incoming::Closed(Some(e))) => return Err(e),
                Some(Incoming::Attention) => {
                    // An ATTENTION after the response was complete still
                    // gets its acknowledgement.
                    if self.shared.take_attention() {
                        attention_ack(self.writer.buf());
                        self.writer.finish(&mut self.wr).await?;
                    }
                }
                Some(Incoming::Message(msg)) => {
                    if self.handle(msg).await? == Flow::Close {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Cancels the request running now, if any (its session is closed when
    /// it returns).
    pub(crate) fn cancel_request(&self) {
        self.shared.cancel_current();
    }

    /// Releases the backend session and the socket.
    pub(crate) async fn close(&mut self) {
        self.reader.abort();
        if let Some(mut session) = self.session.take() {
            let _ = tokio::task::spawn_blocking(move || session.close()).await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), self.wr.shutdown()).await;
    }

    async fn handle(&mut self, msg: Message) -> Result<Flow, TdsError> {
        if msg.status & (status::RESET_CONNECTION | status::RESET_CONNECTION_SKIP_TRAN) != 0 {
            tracing::debug!("RESETCONNECTION requested; the sandbox keeps session state");
        }
        let parsed = match msg.ty {
            kind::SQL_BATCH => parse_batch(&msg.payload).map(|r| vec![r]),
            kind::RPC => parse_rpc(&msg.payload),
            kind::TRANSACTION_MANAGER => parse_transaction_manager(&msg.payload).map(|r| vec![r]),
            kind::BULK_LOAD => Err(TdsError::protocol(
                "bulk load is not supported by the sandbox",
            )),
            other => Err(TdsError::UnexpectedPacket {
                expected: "a request",
                actual: other,
            }),
        };
        match parsed {
            Ok(requests) => self.run_requests(requests).await,
            Err(e) => {
                tracing::warn!(error = %e, ty = msg.ty, "rejecting a malformed request");
                let err = if msg.ty == kind::RPC {
                    SqlError::new(
                        8009,
                        format!(
                            "The incoming tabular data stream (TDS) remote procedure call (RPC) protocol stream is incorrect. {e}"
                        ),
                    )
                } else {
                    SqlError::new(
                        4002,
                        format!(
                            "The incoming tabular data stream (TDS) protocol stream is incorrect. {e}"
                        ),
                    )
                };
                token::message(self.writer.buf(), &err, &self.config.server_name);
                token::done(self.writer.buf(), tok::DONE, done::ERROR, 0, 0);
                self.writer.finish(&mut self.wr).await?;
                Ok(Flow::Continue)
            }
        }
    }

    async fn run_requests(&mut self, requests: Vec<Request>) -> Result<Flow, TdsError> {
        let config = self.config.clone();
        let count = requests.len();
        let mut flow = Flow::Continue;
        for (i, request) in requests.into_iter().enumerate() {
            if self.shared.take_attention() {
                attention_ack(self.writer.buf());
                break;
            }
            let mut encoder = ResponseEncoder::new(&config.server_name, &request);
            let outputs = self.execute(request).await?;
            if self.shared.take_attention() {
                // The cancelled request's output is discarded.
                attention_ack(self.writer.buf());
                break;
            }
            if !self
                .write_outputs(&mut encoder, outputs, i + 1 < count)
                .await?
            {
                attention_ack(self.writer.buf());
                break;
            }
            if encoder.close_after() {
                flow = Flow::Close;
                break;
            }
        }
        self.writer.finish(&mut self.wr).await?;
        let waited = self.meter.take();
        if let Some(session) = self.session.as_mut().filter(|_| !waited.is_zero()) {
            session.record_network_wait(waited);
        }
        Ok(flow)
    }

    /// Runs a request on a blocking thread, with a fresh cancel token that
    /// the reader task cancels on ATTENTION or disconnect.
    async fn execute(&mut self, request: Request) -> Result<Vec<Output>, TdsError> {
        let mut session = self
            .session
            .take()
            .ok_or_else(|| TdsError::Backend("session lost".into()))?;
        let token = CancelToken::default();
        self.shared.begin(&token);
        let joined = tokio::task::spawn_blocking(move || {
            let outputs = session.execute(request, &token);
            (session, outputs)
        })
        .await;
        self.shared.end();
        let (session, outputs) = joined.map_err(|e| TdsError::Backend(e.to_string()))?;
        self.session = Some(session);
        Ok(outputs)
    }

    /// Sends the outputs of one request; `false` if an ATTENTION cut it short.
    async fn write_outputs(
        &mut self,
        encoder: &mut ResponseEncoder<'_>,
        outputs: Vec<Output>,
        more_requests: bool,
    ) -> Result<bool, TdsError> {
        let outputs: Vec<Output> = outputs
            .into_iter()
            .filter(|o| !matches!(o, Output::Message(e) if e.is_cancelled()))
            .collect();
        let ended_with_done = matches!(outputs.last(), Some(Output::Done { .. }));
        let count = outputs.len();
        for (i, out) in outputs.into_iter().enumerate() {
            encoder.output(self.writer.buf(), &out, i + 1 < count);
            if let Output::ResultSet { columns, rows } = out {
                let rows_encoder = RowEncoder::new(&columns);
                // Each row is freed once encoded, while the client reads,
                // rather than all of them before the response ends.
                for row in rows {
                    if self.shared.take_attention() {
                        return Ok(false);
                    }
                    if let Err(e) = rows_encoder.row(self.writer.buf(), &row) {
                        encoder.encode_failure(self.writer.buf(), &e);
                        break;
                    }
                    drop(row);
                    self.writer.send_full(&mut self.wr).await?;
                }
            }
            self.writer.send_full(&mut self.wr).await?;
        }
        encoder.finish(self.writer.buf(), ended_with_done, more_requests);
        Ok(true)
    }
}
