//! The relay session's SQLite, as the store needs it: one statement with parameters, its rows
//! deserialized by column name; and a script of statements (a migration). The statements keep
//! to what Durable Objects' SQLite and stock SQLite both run.

use serde::de::DeserializeOwned;

use crate::stores::StorageError;

/// A parameter of a statement.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    Null,
    Integer(i64),
    Text(String),
}

impl From<&str> for SqlValue {
    fn from(text: &str) -> Self {
        SqlValue::Text(text.to_owned())
    }
}

impl From<String> for SqlValue {
    fn from(text: String) -> Self {
        SqlValue::Text(text)
    }
}

impl From<i64> for SqlValue {
    fn from(n: i64) -> Self {
        SqlValue::Integer(n)
    }
}

impl From<u64> for SqlValue {
    /// Times and sizes: within i64 for every value relay-edge keeps.
    fn from(n: u64) -> Self {
        SqlValue::Integer(n.min(i64::MAX as u64) as i64)
    }
}

impl From<Option<i32>> for SqlValue {
    fn from(n: Option<i32>) -> Self {
        n.map_or(SqlValue::Null, |n| SqlValue::Integer(n.into()))
    }
}

/// A relay session's SQLite.
pub trait Sql {
    /// The rows `query` selects, each deserialized from its columns by name.
    fn rows<T: DeserializeOwned>(&self, query: &str, params: &[SqlValue]) -> Result<Vec<T>, StorageError>;
    /// Runs one statement that selects nothing.
    fn exec(&self, query: &str, params: &[SqlValue]) -> Result<(), StorageError>;
    /// Runs a script of statements with no parameters (a migration).
    fn script(&self, statements: &str) -> Result<(), StorageError>;
}
