//! The relay session's SQLite (the DO's storage) behind the core's `Sql` trait, so the store's
//! decisions (`relay_core::relay_session::store`) run here as they do in the native tests.

use relay_core::relay_session::{Sql, SqlValue, StorageError};
use serde::de::DeserializeOwned;
use worker::{SqlStorage, SqlStorageValue};

/// A Durable Object's SQLite.
pub struct DoSql(pub SqlStorage);

fn bindings(params: &[SqlValue]) -> Vec<SqlStorageValue> {
    params
        .iter()
        .map(|value| match value {
            SqlValue::Null => SqlStorageValue::Null,
            SqlValue::Integer(n) => SqlStorageValue::Integer(*n),
            SqlValue::Text(text) => SqlStorageValue::String(text.clone()),
        })
        .collect()
}

fn failed(e: worker::Error) -> StorageError {
    StorageError(e.to_string())
}

impl Sql for DoSql {
    fn rows<T: DeserializeOwned>(&self, query: &str, params: &[SqlValue]) -> Result<Vec<T>, StorageError> {
        self.0.exec(query, bindings(params)).and_then(|cursor| cursor.to_array::<T>()).map_err(failed)
    }

    fn exec(&self, query: &str, params: &[SqlValue]) -> Result<(), StorageError> {
        self.0.exec(query, bindings(params)).map(drop).map_err(failed)
    }

    fn script(&self, statements: &str) -> Result<(), StorageError> {
        self.0.exec(statements, None).map(drop).map_err(failed)
    }
}
