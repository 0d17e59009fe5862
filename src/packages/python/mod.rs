//! The rules of a Python dependency build, for the runtime a capsule runs in: PEP 440
//! versions and specifiers, PEP 508 requirements and markers, wheel tags, Pyodide's lock and
//! core metadata, and the resolver over them.
//!
//! The build runs in the tab (public/lib/packages/pip.js), which fetches; every decision is
//! made here. This module uses only serde, serde_json and std, and names nothing outside itself
//! (no `crate::` path), because policy-wasm/ compiles these very files into the page's
//! `policy.wasm`.

pub mod lock;
pub mod marker;
pub mod metadata;
pub mod name;
pub mod requirement;
pub mod resolve;
pub mod runtime;
pub mod version;
pub mod wheel;

pub use lock::Lock;
pub use name::canonical_name;
pub use requirement::Requirement;
pub use resolve::{resolve, Known, Step};
pub use runtime::{LockInfo, Runtime};
pub use version::{SpecifierSet, Version};
pub use wheel::WheelName;
