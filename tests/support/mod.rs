//! Test backends of the relay session's storage traits: real SQLite in memory (rusqlite), as
//! the Durable Object has it, and a wrapper that fails the statements a test names.

use std::cell::RefCell;

use relay_core::relay_session::{Sql, SqlValue, StorageError};
use rusqlite::types::ValueRef;
use rusqlite::{params_from_iter, Connection};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// An in-memory SQLite database.
pub struct Sqlite(pub Connection);

impl Sqlite {
    pub fn new() -> Self {
        Sqlite(Connection::open_in_memory().expect("an in-memory database"))
    }
}

fn param(value: &SqlValue) -> rusqlite::types::Value {
    match value {
        SqlValue::Null => rusqlite::types::Value::Null,
        SqlValue::Integer(n) => rusqlite::types::Value::Integer(*n),
        SqlValue::Text(text) => rusqlite::types::Value::Text(text.clone()),
    }
}

fn failed(e: rusqlite::Error) -> StorageError {
    StorageError(e.to_string())
}

impl Sql for Sqlite {
    fn rows<T: DeserializeOwned>(&self, query: &str, params: &[SqlValue]) -> Result<Vec<T>, StorageError> {
        let mut statement = self.0.prepare(query).map_err(failed)?;
        let names: Vec<String> = statement.column_names().into_iter().map(str::to_owned).collect();
        let mut rows = statement.query(params_from_iter(params.iter().map(param))).map_err(failed)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(failed)? {
            let mut object = Map::new();
            for (i, name) in names.iter().enumerate() {
                let value = match row.get_ref(i).map_err(failed)? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(n) => Value::from(n),
                    ValueRef::Real(x) => Value::from(x),
                    ValueRef::Text(t) => Value::from(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => Value::from(b.to_vec()),
                };
                object.insert(name.clone(), value);
            }
            out.push(serde_json::from_value(Value::Object(object)).map_err(|e| StorageError(e.to_string()))?);
        }
        Ok(out)
    }

    fn exec(&self, query: &str, params: &[SqlValue]) -> Result<(), StorageError> {
        self.0.execute(query, params_from_iter(params.iter().map(param))).map(|_| ()).map_err(failed)
    }

    fn script(&self, statements: &str) -> Result<(), StorageError> {
        self.0.execute_batch(statements).map_err(failed)
    }
}

/// A database whose statements containing any of `failing` fail, as storage does when it is
/// unavailable.
pub struct Failing {
    pub inner: Sqlite,
    pub failing: RefCell<Vec<&'static str>>,
}

impl Failing {
    pub fn new(inner: Sqlite, failing: &[&'static str]) -> Self {
        Failing { inner, failing: RefCell::new(failing.to_vec()) }
    }

    fn check(&self, query: &str) -> Result<(), StorageError> {
        match self.failing.borrow().iter().find(|needle| query.contains(*needle)) {
            Some(needle) => Err(StorageError(format!("storage unavailable ({needle})"))),
            None => Ok(()),
        }
    }
}

impl Sql for Failing {
    fn rows<T: DeserializeOwned>(&self, query: &str, params: &[SqlValue]) -> Result<Vec<T>, StorageError> {
        self.check(query)?;
        self.inner.rows(query, params)
    }

    fn exec(&self, query: &str, params: &[SqlValue]) -> Result<(), StorageError> {
        self.check(query)?;
        self.inner.exec(query, params)
    }

    fn script(&self, statements: &str) -> Result<(), StorageError> {
        self.check(statements)?;
        self.inner.script(statements)
    }
}
