//! Exact decimal arithmetic wide enough for decimal(38, s).
//!
//! A decimal is an `i128` count of `10^-scale` units. Products of two
//! 38-digit numbers need 256 bits, so multiplication and division go
//! through [`muldiv`], which computes `a * b / c` exactly and rounds half
//! away from zero, as SQL Server rounds decimals.

use std::cmp::Ordering;

/// The largest decimal precision SQL Server supports.
pub const MAX_PRECISION: u8 = 38;

/// `10^n` for `n <= 38`.
pub fn pow10(n: u8) -> i128 {
    10i128.pow(u32::from(n.min(38)))
}

/// Number of decimal digits of `|v|` (0 has one digit).
pub fn digits(v: i128) -> u8 {
    let mut n = v.unsigned_abs();
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// True when `v` (unscaled) fits `precision` digits.
pub fn fits(v: i128, precision: u8) -> bool {
    v.unsigned_abs() < pow10(precision.min(MAX_PRECISION)).unsigned_abs()
}

const MASK: u128 = u64::MAX as u128;

/// Full 256-bit product of two u128 values as (high, low).
fn mul_wide(a: u128, b: u128) -> (u128, u128) {
    let (a1, a0) = (a >> 64, a & MASK);
    let (b1, b0) = (b >> 64, b & MASK);
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = (p00 >> 64) + (p01 & MASK) + (p10 & MASK);
    let lo = (p00 & MASK) | (mid << 64);
    let hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
    (hi, lo)
}

/// (high, low) / d as (quotient, remainder); `None` when the quotient
/// needs more than 128 bits.
fn div_wide(hi: u128, lo: u128, d: u128) -> Option<(u128, u128)> {
    if d == 0 || hi >= d {
        return None;
    }
    let mut rem = hi;
    let mut q: u128 = 0;
    for i in (0..128).rev() {
        let carry = rem >> 127;
        rem = (rem << 1) | ((lo >> i) & 1);
        q <<= 1;
        if carry == 1 || rem >= d {
            rem = rem.wrapping_sub(d);
            q |= 1;
        }
    }
    Some((q, rem))
}

fn signed(neg: bool, q: u128) -> Option<i128> {
    if neg {
        if q <= i128::MAX as u128 + 1 {
            Some((q as i128).wrapping_neg())
        } else {
            None
        }
    } else {
        i128::try_from(q).ok()
    }
}

/// `a * b / c` rounded half away from zero; `None` on overflow or c = 0.
pub fn muldiv(a: i128, b: i128, c: i128) -> Option<i128> {
    let neg = (a < 0) ^ (b < 0) ^ (c < 0);
    let (hi, lo) = mul_wide(a.unsigned_abs(), b.unsigned_abs());
    let d = c.unsigned_abs();
    let (mut q, r) = div_wide(hi, lo, d)?;
    if r >= d - r {
        q = q.checked_add(1)?;
    }
    signed(neg, q)
}

/// Changes the scale of `v`, rounding half away from zero when it shrinks.
pub fn rescale(v: i128, from: u8, to: u8) -> Option<i128> {
    match to.cmp(&from) {
        Ordering::Equal => Some(v),
        Ordering::Greater => v.checked_mul(pow10(to - from)),
        Ordering::Less => muldiv(v, 1, pow10(from - to)),
    }
}

/// Exact comparison of `a * 10^-sa` with `b * 10^-sb`.
pub fn cmp(a: i128, sa: u8, b: i128, sb: u8) -> Ordering {
    if (a < 0) != (b < 0) {
        return a.cmp(&b);
    }
    let s = sa.max(sb);
    let wa = mul_wide(a.unsigned_abs(), pow10(s - sa).unsigned_abs());
    let wb = mul_wide(b.unsigned_abs(), pow10(s - sb).unsigned_abs());
    let ord = wa.cmp(&wb);
    if a < 0 { ord.reverse() } else { ord }
}

/// Removes trailing fractional zeros: the canonical form used by keys.
pub fn normalize(mut v: i128, mut scale: u8) -> (i128, u8) {
    while scale > 0 && v % 10 == 0 {
        v /= 10;
        scale -= 1;
    }
    if v == 0 { (0, 0) } else { (v, scale) }
}

/// `v * 10^-scale` as text, SQL Server style (`-0.50`, `12.300`).
pub fn format(v: i128, scale: u8) -> String {
    let digits = v.unsigned_abs().to_string();
    let scale = usize::from(scale);
    let mut out = String::with_capacity(digits.len() + 3);
    if v < 0 {
        out.push('-');
    }
    if scale == 0 {
        out.push_str(&digits);
    } else if digits.len() > scale {
        let (i, f) = digits.split_at(digits.len() - scale);
        out.push_str(i);
        out.push('.');
        out.push_str(f);
    } else {
        out.push_str("0.");
        out.push_str(&"0".repeat(scale - digits.len()));
        out.push_str(&digits);
    }
    out
}

/// `v * 10^-scale` as f64 (correctly rounded through its text form).
pub fn to_f64(v: i128, scale: u8) -> f64 {
    format(v, scale).parse().unwrap_or(0.0)
}

/// A plain decimal number read from text: sign, integer and fraction
/// digits (no exponent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub negative: bool,
    /// Integer digits without leading zeros (may be empty).
    pub int: String,
    /// Fraction digits as written.
    pub frac: String,
}

impl Parsed {
    /// Reads `[+-]digits[.digits]`; at least one digit overall.
    pub fn read(s: &str) -> Option<Parsed> {
        let (negative, rest) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let (int, frac) = match rest.split_once('.') {
            Some((i, f)) => (i, f),
            None => (rest, ""),
        };
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(Parsed {
            negative,
            int: int.trim_start_matches('0').to_string(),
            frac: frac.to_string(),
        })
    }

    /// The precision and scale a literal with these digits has.
    pub fn shape(&self) -> (usize, usize) {
        let scale = self.frac.len();
        ((self.int.len() + scale).max(1), scale)
    }

    /// The value in units of `10^-scale`, rounded half away from zero;
    /// `None` when it needs more than 38 digits.
    pub fn scaled(&self, scale: u8) -> Option<i128> {
        let scale_us = usize::from(scale);
        if self.int.len() + scale_us > usize::from(MAX_PRECISION) {
            return None;
        }
        let mut text = self.int.clone();
        let kept = &self.frac[..self.frac.len().min(scale_us)];
        text.push_str(kept);
        text.push_str(&"0".repeat(scale_us - kept.len()));
        let mut v: i128 = if text.is_empty() {
            0
        } else {
            text.parse().ok()?
        };
        if let Some(next) = self.frac.as_bytes().get(scale_us)
            && *next >= b'5'
        {
            v = v.checked_add(1)?;
        }
        if digits(v) > MAX_PRECISION {
            return None;
        }
        Some(if self.negative { -v } else { v })
    }
}

/// `f` in units of `10^-scale`, rounded half away from zero from its
/// shortest round-trip decimal form (so 0.1E0 becomes exactly 0.1);
/// `None` beyond 38 digits.
pub fn from_f64(f: f64, scale: u8) -> Option<i128> {
    parsed_f64(f)?.scaled(scale)
}

/// The shortest decimal text of a finite float as a [`Parsed`].
pub fn parsed_f64(f: f64) -> Option<Parsed> {
    if !f.is_finite() || f.abs() >= 1e38 {
        return None;
    }
    let text = std::format!("{f:e}");
    let (mantissa, exp) = text.split_once('e')?;
    let exp: i64 = exp.parse().ok()?;
    let m = Parsed::read(mantissa)?;
    let all = std::format!("{}{}", if m.int.is_empty() { "0" } else { &m.int }, m.frac);
    // The mantissa has one integer digit: the point sits after 1 + exp digits.
    let point = 1 + exp;
    let (int, frac) = if point <= 0 {
        (
            String::new(),
            std::format!("{}{all}", "0".repeat(usize::try_from(-point).ok()?)),
        )
    } else {
        let point = usize::try_from(point).ok()?;
        if point >= all.len() {
            (
                std::format!("{all}{}", "0".repeat(point - all.len())),
                String::new(),
            )
        } else {
            (all[..point].to_string(), all[point..].to_string())
        }
    };
    Some(Parsed {
        negative: m.negative,
        int: int.trim_start_matches('0').to_string(),
        frac,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn muldiv_handles_256_bit_intermediates() {
        let big = pow10(38) - 1;
        assert_eq!(muldiv(big, big, big), Some(big));
        assert_eq!(muldiv(-big, 10, 100), Some(-pow10(37)));
        assert_eq!(muldiv(15, 1, 10), Some(2));
        assert_eq!(muldiv(-15, 1, 10), Some(-2));
        assert_eq!(muldiv(14, 1, 10), Some(1));
        assert_eq!(muldiv(big, big, 1), None);
        assert_eq!(muldiv(1, 1, 0), None);
    }

    #[test]
    fn rescale_rounds_half_away() {
        assert_eq!(rescale(12345, 3, 1), Some(123));
        assert_eq!(rescale(12350, 3, 1), Some(124));
        assert_eq!(rescale(-12350, 3, 1), Some(-124));
        assert_eq!(rescale(5, 0, 2), Some(500));
        assert_eq!(rescale(pow10(37), 0, 2), None);
    }

    #[test]
    fn compares_across_scales() {
        assert_eq!(cmp(150, 2, 15, 1), Ordering::Equal);
        assert_eq!(cmp(-150, 2, 14, 1), Ordering::Less);
        assert_eq!(cmp(pow10(38) - 1, 38, 1, 0), Ordering::Less);
        assert_eq!(cmp(-1, 0, -(pow10(38) - 1), 38), Ordering::Less);
    }

    #[test]
    fn formats_and_parses() {
        assert_eq!(format(-50, 2), "-0.50");
        assert_eq!(format(12300, 3), "12.300");
        assert_eq!(format(7, 0), "7");
        let p = Parsed::read("-001.2350").unwrap_or_else(|| panic!("parse"));
        assert_eq!(p.shape(), (5, 4));
        assert_eq!(p.scaled(2), Some(-124));
        assert_eq!(Parsed::read("1.2.3"), None);
        assert_eq!(Parsed::read("."), None);
        assert_eq!(from_f64(0.125, 2), Some(13));
        assert_eq!(from_f64(-1.5e3, 1), Some(-15000));
        assert_eq!(from_f64(1.25e-3, 5), Some(125));
        assert_eq!(from_f64(0.1, 30), Some(pow10(29)));
        assert_eq!(from_f64(1e40, 0), None);
        assert_eq!(normalize(1500, 3), (15, 1));
        assert!(fits(pow10(38) - 1, 38));
        assert!(!fits(pow10(38), 38));
        assert!(!fits(-100, 2));
    }
}
