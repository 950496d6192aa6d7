//! Data types on the wire (MS-TDS 2.2.5): TYPE_INFO and the value formats
//! of parameters (RPC) and columns (ROW / NBCROW / RETURNVALUE).

pub(crate) mod datetime;
pub(crate) mod decode;
pub(crate) mod encode;
pub(crate) mod text;
pub(crate) mod type_info;

#[cfg(test)]
pub(crate) mod tests;

/// A value the backend produced does not fit the declared column type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot send {value} as {ty}")]
pub(crate) struct EncodeError {
    pub value: String,
    pub ty: String,
}

impl EncodeError {
    pub(crate) fn new(value: &crate::sql::Value, ty: impl Into<String>) -> Self {
        let mut value = format!("{value:?}");
        value.truncate(80);
        Self {
            value,
            ty: ty.into(),
        }
    }
}
