//! Packages: the dependencies a run asks for (`npm.dependencies`, `pip.requirements`,
//! `pip.wheelUrls`) and the build that turns them into a capsule's deps layer.
//!
//! The tab that runs the capsule builds the layer (it resolves, fetches and bundles in WASM);
//! the edge trusts none of it: the tab uploads the layer under single-use grants bound to its
//! sha256 and size ([`grant`]), and `finalize` checks every claim before the DO signs the
//! capsule with the run's own policy ([`pending`]). A finished build is remembered by the
//! request's key ([`record`]), so the same dependencies are never built twice for a tenant.

pub mod edge_build;
pub mod grant;
pub mod imports;
pub mod pending;
pub mod python;
pub mod record;
pub mod request;
pub mod sources;

pub use grant::UploadGrant;
pub use pending::{LayerClaim, PendingBuild, Proposal};
pub use record::BuildRecord;
pub use request::DepsRequest;
pub use sources::{Admitted, PackageSources};
