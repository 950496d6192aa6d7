//! TDS packet framing (MS-TDS 2.2.3): the 8-byte header, reassembly of a
//! multi-packet message, and splitting an outgoing message at the
//! negotiated packet size.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::error::TdsError;

/// Bytes in a packet header (MS-TDS 2.2.3.1).
pub(crate) const HEADER_LEN: usize = 8;

/// Smallest and largest packet sizes LOGIN7 may negotiate (MS-TDS 2.2.6.4).
pub(crate) const MIN_PACKET_SIZE: u32 = 512;
pub(crate) const MAX_PACKET_SIZE: u32 = 32767;

/// Packet types (MS-TDS 2.2.3.1.1).
pub(crate) mod kind {
    pub const SQL_BATCH: u8 = 0x01;
    pub const RPC: u8 = 0x03;
    pub const TABULAR_RESULT: u8 = 0x04;
    pub const ATTENTION: u8 = 0x06;
    pub const BULK_LOAD: u8 = 0x07;
    pub const TRANSACTION_MANAGER: u8 = 0x0E;
    pub const LOGIN7: u8 = 0x10;
    pub const PRELOGIN: u8 = 0x12;
}

/// Status bits (MS-TDS 2.2.3.1.2).
pub(crate) mod status {
    pub const END_OF_MESSAGE: u8 = 0x01;
    pub const IGNORE: u8 = 0x02;
    pub const RESET_CONNECTION: u8 = 0x08;
    pub const RESET_CONNECTION_SKIP_TRAN: u8 = 0x10;
}

/// A decoded packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub ty: u8,
    pub status: u8,
    /// Total packet length, header included.
    pub length: u16,
}

impl Header {
    pub(crate) fn parse(bytes: &[u8; HEADER_LEN]) -> Result<Self, TdsError> {
        let length = u16::from_be_bytes([bytes[2], bytes[3]]);
        if (length as usize) < HEADER_LEN {
            return Err(TdsError::protocol(format!(
                "packet length {length} shorter than its header"
            )));
        }
        Ok(Self {
            ty: bytes[0],
            status: bytes[1],
            length,
        })
    }

    pub(crate) fn payload_len(&self) -> usize {
        self.length as usize - HEADER_LEN
    }

    pub(crate) fn is_eom(&self) -> bool {
        self.status & status::END_OF_MESSAGE != 0
    }
}

/// Writes a header; `len` is the full packet length.
pub(crate) fn encode_header(
    ty: u8,
    status: u8,
    len: usize,
    spid: u16,
    packet_id: u8,
) -> [u8; HEADER_LEN] {
    let len = (len.min(u16::MAX as usize) as u16).to_be_bytes();
    let spid = spid.to_be_bytes();
    [ty, status, len[0], len[1], spid[0], spid[1], packet_id, 0]
}

/// One reassembled client message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Message {
    pub ty: u8,
    /// Status of the first packet: carries RESETCONNECTION.
    pub status: u8,
    pub payload: Vec<u8>,
}

/// Reads one whole message. `Ok(None)` is a clean EOF between messages.
/// A message whose last packet has the IGNORE bit is dropped, as the
/// client abandoned it (MS-TDS 2.2.3.1.2), and the next one is read.
pub(crate) async fn read_message<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_len: usize,
) -> Result<Option<Message>, TdsError> {
    loop {
        let mut first: Option<Header> = None;
        let mut payload = Vec::new();
        loop {
            let mut raw = [0u8; HEADER_LEN];
            if first.is_none() {
                // EOF before the first byte of a message is a normal close.
                match reader.read(&mut raw[..1]).await? {
                    0 => return Ok(None),
                    _ => reader.read_exact(&mut raw[1..]).await?,
                };
            } else {
                reader.read_exact(&mut raw).await?;
            }
            let header = Header::parse(&raw)?;
            if let Some(first) = first {
                if first.ty != header.ty {
                    return Err(TdsError::protocol(format!(
                        "packet type changed from {:#04x} to {:#04x} inside a message",
                        first.ty, header.ty
                    )));
                }
            } else {
                first = Some(header);
            }
            let start = payload.len();
            if start + header.payload_len() > max_len {
                return Err(TdsError::MessageTooLarge { limit: max_len });
            }
            payload.resize(start + header.payload_len(), 0);
            reader.read_exact(&mut payload[start..]).await?;
            if header.is_eom() {
                if header.status & status::IGNORE != 0 {
                    tracing::debug!(ty = header.ty, "client abandoned a message (IGNORE bit)");
                    break;
                }
                let Some(first) = first else { break };
                return Ok(Some(Message {
                    ty: first.ty,
                    status: first.status,
                    payload,
                }));
            }
        }
    }
}

/// Builds one outgoing message and sends it packet by packet, so a large
/// result never has to sit in memory whole.
pub(crate) struct PacketWriter {
    ty: u8,
    spid: u16,
    packet_size: usize,
    next_id: u8,
    /// Payload not yet sent.
    buf: Vec<u8>,
    scratch: Vec<u8>,
}

impl PacketWriter {
    pub(crate) fn new(ty: u8, spid: u16, packet_size: u32) -> Self {
        let packet_size = packet_size.clamp(MIN_PACKET_SIZE, MAX_PACKET_SIZE) as usize;
        Self {
            ty,
            spid,
            packet_size,
            next_id: 1,
            buf: Vec::new(),
            scratch: Vec::with_capacity(packet_size),
        }
    }

    /// Where tokens are appended.
    pub(crate) fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    fn capacity(&self) -> usize {
        self.packet_size - HEADER_LEN
    }

    async fn write_packet<W: AsyncWrite + Unpin>(
        &mut self,
        w: &mut W,
        range: std::ops::Range<usize>,
        eom: bool,
    ) -> Result<(), TdsError> {
        let status = if eom { status::END_OF_MESSAGE } else { 0 };
        let len = HEADER_LEN + range.len();
        self.scratch.clear();
        self.scratch.extend_from_slice(&encode_header(
            self.ty,
            status,
            len,
            self.spid,
            self.next_id,
        ));
        self.scratch.extend_from_slice(&self.buf[range]);
        self.next_id = self.next_id.wrapping_add(1);
        w.write_all(&self.scratch).await?;
        Ok(())
    }

    /// Sends every full packet while more data is known to follow.
    pub(crate) async fn send_full<W: AsyncWrite + Unpin>(
        &mut self,
        w: &mut W,
    ) -> Result<(), TdsError> {
        let cap = self.capacity();
        let mut start = 0;
        while self.buf.len() - start > cap {
            self.write_packet(w, start..start + cap, false).await?;
            start += cap;
        }
        if start > 0 {
            self.buf.drain(..start);
        }
        Ok(())
    }

    /// Sends the rest with END_OF_MESSAGE and flushes. The writer can be
    /// reused for the next message.
    pub(crate) async fn finish<W: AsyncWrite + Unpin>(
        &mut self,
        w: &mut W,
    ) -> Result<(), TdsError> {
        self.send_full(w).await?;
        let len = self.buf.len();
        self.write_packet(w, 0..len, true).await?;
        self.buf.clear();
        self.next_id = 1;
        w.flush().await?;
        Ok(())
    }

    /// Changes the packet size for later messages (after LOGIN7).
    pub(crate) fn set_packet_size(&mut self, packet_size: u32) {
        self.packet_size = packet_size.clamp(MIN_PACKET_SIZE, MAX_PACKET_SIZE) as usize;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(ty: u8, status: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = encode_header(ty, status, HEADER_LEN + payload.len(), 0, 1).to_vec();
        out.extend_from_slice(payload);
        out
    }

    #[tokio::test]
    async fn reassembles_multi_packet_messages() {
        let mut wire = packet(kind::SQL_BATCH, 0, b"abc");
        wire.extend(packet(kind::SQL_BATCH, status::END_OF_MESSAGE, b"def"));
        wire.extend(packet(
            kind::RPC,
            status::END_OF_MESSAGE | status::IGNORE,
            b"zzz",
        ));
        wire.extend(packet(kind::ATTENTION, status::END_OF_MESSAGE, b""));
        let mut r = &wire[..];
        let m = read_message(&mut r, 1 << 20).await.unwrap().unwrap();
        assert_eq!(
            (m.ty, m.payload.as_slice()),
            (kind::SQL_BATCH, &b"abcdef"[..])
        );
        let m = read_message(&mut r, 1 << 20).await.unwrap().unwrap();
        assert_eq!((m.ty, m.payload.len()), (kind::ATTENTION, 0));
        assert!(read_message(&mut r, 1 << 20).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn rejects_bad_framing() {
        let bad_len = [1u8, 1, 0, 4, 0, 0, 1, 0];
        assert!(read_message(&mut &bad_len[..], 100).await.is_err());
        let mut mixed = packet(kind::SQL_BATCH, 0, b"a");
        mixed.extend(packet(kind::RPC, 1, b"b"));
        assert!(read_message(&mut &mixed[..], 100).await.is_err());
        let big = packet(kind::SQL_BATCH, 1, &[0; 50]);
        assert!(matches!(
            read_message(&mut &big[..], 10).await,
            Err(TdsError::MessageTooLarge { .. })
        ));
        let truncated = &packet(kind::SQL_BATCH, 1, b"abcd")[..10];
        assert!(read_message(&mut &truncated[..], 100).await.is_err());
    }

    #[tokio::test]
    async fn splits_at_packet_size() {
        let mut w = PacketWriter::new(kind::TABULAR_RESULT, 7, 512);
        w.buf().extend(std::iter::repeat_n(9u8, 504 * 2 + 10));
        let mut out = Vec::new();
        w.finish(&mut out).await.unwrap();
        assert_eq!(out.len(), 504 * 2 + 10 + 3 * HEADER_LEN);
        assert_eq!(&out[..8], &[4, 0, 2, 0, 0, 7, 1, 0]);
        assert_eq!(out[512 + 1], 0);
        assert_eq!(out[1024 + 1], status::END_OF_MESSAGE);
        assert_eq!(out[1024 + 6], 3);
        let mut r = &out[..];
        let m = read_message(&mut r, 1 << 20).await.unwrap().unwrap();
        assert_eq!(m.payload.len(), 504 * 2 + 10);
    }
}
