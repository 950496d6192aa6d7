//! The protobuf wire format: varints and length-delimited fields, which is
//! all the Kubernetes `generated.proto` messages use.

/// One field's payload as it appears on the wire.
#[derive(Debug, Clone, Copy)]
pub enum Field<'a> {
    Varint(u64),
    /// Fixed 32/64-bit payloads; no Kubernetes field we decode uses them.
    Fixed,
    Bytes(&'a [u8]),
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (b, rest) = self.0.split_first()?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        self.0 = self.0.get(n..)?;
        Some(())
    }

    fn next(&mut self) -> Option<Option<(u64, Field<'a>)>> {
        if self.0.is_empty() {
            return Some(None);
        }
        let key = self.varint()?;
        let field = match key & 7 {
            0 => Field::Varint(self.varint()?),
            1 => {
                self.skip(8)?;
                Field::Fixed
            }
            2 => {
                let len = usize::try_from(self.varint()?).ok()?;
                let b = self.0.get(..len)?;
                self.skip(len)?;
                Field::Bytes(b)
            }
            5 => {
                self.skip(4)?;
                Field::Fixed
            }
            _ => return None,
        };
        Some(Some((key >> 3, field)))
    }
}

/// Splits a message into (field number, payload) pairs; `None` if malformed.
pub fn fields(bytes: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut r = Reader(bytes);
    let mut out = Vec::new();
    while let Some(f) = r.next()? {
        out.push(f);
    }
    Some(out)
}
