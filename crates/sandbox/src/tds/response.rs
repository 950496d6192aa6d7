//! Turning a request's `Output`s into tokens (MS-TDS 2.2.7, 3.3.5.x): which
//! DONE-family token ends each statement and which status bits it carries.

use super::codec::EncodeError;
use super::token::{self, done, env, tok};
use crate::sql::{Abort, Output, Request, SqlError, TransactionEvent};

/// CurCmd of a DONE after a SELECT (MS-TDS 2.2.7.6 uses the statement's
/// token; clients only display it).
const CMD_SELECT: u16 = 0xC1;

/// Per-request encoding state.
pub(crate) struct ResponseEncoder<'a> {
    server_name: &'a str,
    rpc: bool,
    /// Parameter names of the RPC, for RETURNVALUE ordinals.
    param_names: Vec<String>,
    error_in_statement: bool,
    any_error: bool,
    close_after: bool,
    last_was_result: bool,
}

impl<'a> ResponseEncoder<'a> {
    pub(crate) fn new(server_name: &'a str, request: &Request) -> Self {
        let (rpc, param_names) = match request {
            Request::Rpc { params, .. } => (true, params.iter().map(|p| p.name.clone()).collect()),
            Request::Batch { .. } => (false, Vec::new()),
        };
        Self {
            server_name,
            rpc,
            param_names,
            error_in_statement: false,
            any_error: false,
            close_after: false,
            last_was_result: false,
        }
    }

    /// An error with `Abort::Connection` was sent: close after the response.
    pub(crate) fn close_after(&self) -> bool {
        self.close_after
    }

    /// Encodes one output other than result-set rows (for a result set only
    /// COLMETADATA: rows are sent one by one by the caller). `more` tells
    /// whether further outputs of this request follow.
    pub(crate) fn output(&mut self, buf: &mut Vec<u8>, out: &Output, more: bool) {
        let was_result = std::mem::replace(&mut self.last_was_result, false);
        match out {
            Output::ResultSet { columns, .. } => {
                token::col_metadata(buf, columns);
                self.last_was_result = true;
            }
            Output::Done { rows } => {
                let mut status = if self.error_in_statement {
                    done::ERROR
                } else {
                    done::FINAL
                };
                if rows.is_some() {
                    status |= done::COUNT;
                }
                let cmd = if was_result { CMD_SELECT } else { 0 };
                let token = if self.rpc {
                    status |= done::MORE;
                    tok::DONEINPROC
                } else {
                    if more {
                        status |= done::MORE;
                    }
                    tok::DONE
                };
                token::done(buf, token, status, cmd, rows.unwrap_or(0));
                self.error_in_statement = false;
            }
            Output::Message(err) => self.message(buf, err),
            Output::DatabaseChanged { from, to } => {
                token::env_change_text(buf, env::DATABASE, to, from)
            }
            Output::Transaction(event) => match *event {
                TransactionEvent::Begin { descriptor } => {
                    token::env_change_bytes(buf, env::BEGIN_TRAN, &descriptor.to_le_bytes(), &[])
                }
                TransactionEvent::Commit { descriptor } => {
                    token::env_change_bytes(buf, env::COMMIT_TRAN, &[], &descriptor.to_le_bytes())
                }
                TransactionEvent::Rollback { descriptor } => {
                    token::env_change_bytes(buf, env::ROLLBACK_TRAN, &[], &descriptor.to_le_bytes())
                }
            },
            Output::ReturnValue(param) => {
                let ordinal = self
                    .param_names
                    .iter()
                    .position(|n| n.eq_ignore_ascii_case(&param.name))
                    .unwrap_or(0);
                if let Err(e) = token::return_value(buf, ordinal as u16, param) {
                    self.encode_failure(buf, &e);
                }
            }
            Output::ReturnStatus(status) => token::return_status(buf, *status),
        }
    }

    /// Sends an INFO or ERROR token and tracks the error state.
    pub(crate) fn message(&mut self, buf: &mut Vec<u8>, err: &SqlError) {
        if err.is_cancelled() {
            return;
        }
        token::message(buf, err, self.server_name);
        if err.class > 10 {
            self.error_in_statement = true;
            self.any_error = true;
        }
        if err.abort == Abort::Connection {
            self.close_after = true;
        }
    }

    /// A value the backend produced cannot be sent: report it as an error
    /// instead of corrupting the stream.
    pub(crate) fn encode_failure(&mut self, buf: &mut Vec<u8>, e: &EncodeError) {
        tracing::warn!(error = %e, "backend value does not fit its declared type");
        let err = SqlError::new(50000, format!("Sandbox TDS layer: {e}."));
        self.message(buf, &err);
    }

    /// Ends the request: the final DONE of a batch when the outputs did not
    /// end with one, or the DONEPROC of an RPC. `more_requests` is set when
    /// another RPC of the same message follows.
    pub(crate) fn finish(&mut self, buf: &mut Vec<u8>, ended_with_done: bool, more_requests: bool) {
        let more = if more_requests {
            done::MORE
        } else {
            done::FINAL
        };
        if self.rpc {
            let status = if self.any_error {
                done::ERROR
            } else {
                done::FINAL
            } | more;
            token::done(buf, tok::DONEPROC, status, 0, 0);
        } else if !ended_with_done {
            let status = if self.error_in_statement {
                done::ERROR
            } else {
                done::FINAL
            } | more;
            token::done(buf, tok::DONE, status, 0, 0);
        }
    }
}

/// The DONE acknowledging an ATTENTION (MS-TDS 3.2.5.1 / 3.3.5.10).
pub(crate) fn attention_ack(buf: &mut Vec<u8>) {
    token::done(buf, tok::DONE, done::ATTN, 0, 0);
}
