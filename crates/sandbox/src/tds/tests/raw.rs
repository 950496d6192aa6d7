//! A minimal hand-written TDS client for wire-level assertions.

use std::net::SocketAddr;

use bytes::BufMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::tds::login::tests::build as build_login7;
use crate::tds::packet::{HEADER_LEN, Header, encode_header, kind, status};
use crate::tds::wire::put_ucs2;

pub(crate) struct Raw {
    pub stream: TcpStream,
}

/// One packet as received.
pub(crate) struct Packet {
    pub header: Header,
    pub payload: Vec<u8>,
}

impl Raw {
    pub(crate) async fn connect(addr: SocketAddr) -> Self {
        Self {
            stream: TcpStream::connect(addr).await.expect("connect"),
        }
    }

    /// Sends one message split into packets of `packet_size`.
    pub(crate) async fn send(&mut self, ty: u8, payload: &[u8], packet_size: usize) {
        let cap = packet_size - HEADER_LEN;
        let chunks: Vec<&[u8]> = if payload.is_empty() {
            vec![&[][..]]
        } else {
            payload.chunks(cap).collect()
        };
        let last = chunks.len() - 1;
        let mut wire = Vec::new();
        for (i, chunk) in chunks.iter().enumerate() {
            let st = if i == last { status::END_OF_MESSAGE } else { 0 };
            wire.extend_from_slice(&encode_header(
                ty,
                st,
                HEADER_LEN + chunk.len(),
                0,
                (i + 1) as u8,
            ));
            wire.extend_from_slice(chunk);
        }
        self.stream.write_all(&wire).await.expect("send");
    }

    /// Reads packets up to END_OF_MESSAGE; `None` if the server closed.
    pub(crate) async fn packets(&mut self) -> Option<Vec<Packet>> {
        let mut out = Vec::new();
        loop {
            let mut raw = [0u8; HEADER_LEN];
            if self.stream.read_exact(&mut raw).await.is_err() {
                return None;
            }
            let header = Header::parse(&raw).expect("header");
            let mut payload = vec![0u8; header.payload_len()];
            self.stream.read_exact(&mut payload).await.ok()?;
            let eom = header.is_eom();
            out.push(Packet { header, payload });
            if eom {
                return Some(out);
            }
        }
    }

    pub(crate) async fn message(&mut self) -> Option<Vec<u8>> {
        Some(
            self.packets()
                .await?
                .into_iter()
                .flat_map(|p| p.payload)
                .collect(),
        )
    }

    /// PRELOGIN without encryption, then LOGIN7; returns the login response.
    pub(crate) async fn login(
        addr: SocketAddr,
        password: &str,
        packet_size: u32,
    ) -> (Raw, Vec<u8>) {
        let mut raw = Raw::connect(addr).await;
        raw.send(kind::PRELOGIN, &prelogin(0x02), 4096).await;
        raw.message().await.expect("prelogin answer");
        raw.send(
            kind::LOGIN7,
            &build_login7("sa", password, "testdb", packet_size),
            4096,
        )
        .await;
        let response = raw.message().await.expect("login response");
        (raw, response)
    }
}

/// PRELOGIN with VERSION and ENCRYPTION only.
pub(crate) fn prelogin(encryption: u8) -> Vec<u8> {
    let mut p = vec![0x00, 0, 11, 0, 6, 0x01, 0, 17, 0, 1, 0xFF];
    p.extend_from_slice(&[0x10, 0, 0, 0, 0, 0, encryption]);
    p
}

/// ALL_HEADERS with a transaction descriptor header (MS-TDS 2.2.5.3).
pub(crate) fn all_headers() -> Vec<u8> {
    let mut h = Vec::new();
    h.put_u32_le(22);
    h.put_u32_le(18);
    h.put_u16_le(2);
    h.put_u64_le(0);
    h.put_u32_le(1);
    h
}

pub(crate) fn batch(sql: &str) -> Vec<u8> {
    let mut p = all_headers();
    put_ucs2(&mut p, sql);
    p
}

/// An RPC by name with one int parameter (INTN) per value.
pub(crate) fn rpc(name: &str, int_params: &[(&str, i32, bool)]) -> Vec<u8> {
    let mut p = Vec::new();
    p.put_u16_le(name.encode_utf16().count() as u16);
    put_ucs2(&mut p, name);
    p.put_u16_le(0);
    for (param, value, output) in int_params {
        p.put_u8(param.encode_utf16().count() as u8);
        put_ucs2(&mut p, param);
        p.put_u8(u8::from(*output));
        p.extend_from_slice(&[0x26, 4, 4]);
        p.put_i32_le(*value);
    }
    p
}

/// True if `needle` occurs in `haystack`.
pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
