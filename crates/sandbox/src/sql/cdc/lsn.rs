//! Log sequence numbers: SQL Server's 10-byte log positions
//! (VLF sequence : log block : slot), as CDC exposes them in `binary(10)`
//! columns and `nvarchar(23)` DMV columns
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/track-changes/work-with-change-data-sql-server>).

use std::fmt;

/// A log position. Orders as SQL Server compares the `binary(10)`: VLF,
/// then block, then slot, all unsigned and big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn {
    pub vlf: u32,
    pub block: u32,
    pub slot: u16,
}

impl Lsn {
    /// `0x00000000000000000000`, which fn_cdc_get_min_lsn returns for an
    /// unknown capture instance.
    pub const ZERO: Lsn = Lsn {
        vlf: 0,
        block: 0,
        slot: 0,
    };

    pub fn new(vlf: u32, block: u32, slot: u16) -> Self {
        Self { vlf, block, slot }
    }

    /// The `binary(10)` form.
    pub fn to_bytes(self) -> Vec<u8> {
        let mut b = Vec::with_capacity(10);
        b.extend_from_slice(&self.vlf.to_be_bytes());
        b.extend_from_slice(&self.block.to_be_bytes());
        b.extend_from_slice(&self.slot.to_be_bytes());
        b
    }

    /// Reads a `binary(10)`; shorter values are right-padded with zeros as
    /// SQL Server pads binary, longer ones are refused.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        let a: [u8; 10] = match <[u8; 10]>::try_from(b) {
            Ok(exact) => exact,
            Err(_) if b.len() < 10 => {
                let mut a = [0u8; 10];
                a[..b.len()].copy_from_slice(b);
                a
            }
            Err(_) => return None,
        };
        Some(Self {
            vlf: u32::from_be_bytes([a[0], a[1], a[2], a[3]]),
            block: u32::from_be_bytes([a[4], a[5], a[6], a[7]]),
            slot: u16::from_be_bytes([a[8], a[9]]),
        })
    }

    fn to_u128(self) -> u128 {
        (u128::from(self.vlf) << 48) | (u128::from(self.block) << 16) | u128::from(self.slot)
    }

    fn from_u128(v: u128) -> Self {
        Self {
            vlf: (v >> 48) as u32,
            block: (v >> 16) as u32,
            slot: v as u16,
        }
    }

    /// The next representable LSN (sys.fn_cdc_increment_lsn).
    pub fn increment(self) -> Self {
        Self::from_u128(self.to_u128().saturating_add(1) & ((1u128 << 80) - 1))
    }

    /// The previous representable LSN (sys.fn_cdc_decrement_lsn).
    pub fn decrement(self) -> Self {
        Self::from_u128(self.to_u128().saturating_sub(1))
    }

    /// The DMV form, `0000002D:00000580:001D` (nvarchar(23)).
    pub fn dmv_text(self) -> String {
        format!("{:08X}:{:08X}:{:04X}", self.vlf, self.block, self.slot)
    }
}

impl fmt::Display for Lsn {
    /// `0x` and 20 hex digits, as SSMS shows a binary(10).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:08X}{:08X}{:04X}", self.vlf, self.block, self.slot)
    }
}

/// Hands out LSNs in log order: one log block per transaction, one slot
/// per log record inside it.
#[derive(Debug, Clone)]
pub struct LsnAllocator {
    next: Lsn,
}

impl Default for LsnAllocator {
    fn default() -> Self {
        Self {
            next: Lsn::new(0x2D, 0x10, 1),
        }
    }
}

impl LsnAllocator {
    /// Starts a new log block (a transaction) and returns its first LSN.
    pub fn begin_block(&mut self) -> Lsn {
        if self.next.slot > 1 {
            let (block, overflow) = self.next.block.overflowing_add(8);
            self.next = if overflow {
                Lsn::new(self.next.vlf + 1, 0x10, 1)
            } else {
                Lsn::new(self.next.vlf, block, 1)
            };
        }
        self.take()
    }

    /// The next LSN in the current block (a new block when it is full).
    pub fn take(&mut self) -> Lsn {
        if self.next.slot == u16::MAX {
            self.next = Lsn::new(self.next.vlf, self.next.block.wrapping_add(8), 1);
        }
        let l = self.next;
        self.next.slot += 1;
        l
    }

    /// The highest LSN handed out so far.
    pub fn last(&self) -> Lsn {
        self.next.decrement()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_order() {
        let a = Lsn::new(0x2D, 0x580, 0x1D);
        assert_eq!(a.to_string(), "0x0000002D00000580001D");
        assert_eq!(Lsn::from_bytes(&a.to_bytes()), Some(a));
        assert!(a < a.increment());
        assert_eq!(a.increment().decrement(), a);
        assert_eq!(a.dmv_text(), "0000002D:00000580:001D");
        let mut alloc = LsnAllocator::default();
        let b1 = alloc.begin_block();
        let s = alloc.take();
        let b2 = alloc.begin_block();
        assert!(b1 < s && s < b2);
    }
}
