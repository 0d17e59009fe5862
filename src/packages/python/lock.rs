//! A Pyodide lock (`pyodide-lock.json`): the packages of Pyodide's own distribution, each a
//! file under the distribution's index with its sha256 and the packages it depends on. The lock
//! is the trust root: any mirror may serve the files, and a file whose sha256 differs from the
//! lock's is refused before it is used.

use super::name::canonical_name;
use super::runtime::LockInfo;
use super::version::Version;
use serde::Deserialize;
use std::collections::BTreeMap;

/// What a lock says of one package.
#[derive(Debug, Clone, Deserialize)]
pub struct LockPackage {
    pub name: String,
    pub version: String,
    pub file_name: String,
    pub sha256: String,
    #[serde(default)]
    pub depends: Vec<String>,
    /// `site` (site-packages) or `dynlib` (a shared library, into the library directory).
    #[serde(default = "site")]
    pub install_dir: String,
}

fn site() -> String {
    "site".into()
}

#[derive(Debug, Clone, Deserialize)]
pub struct Lock {
    pub info: LockInfo,
    packages: BTreeMap<String, LockPackage>,
}

impl Lock {
    /// Parses a lock and checks every entry it could hand out: a version, a plain file name
    /// (a wheel or a zip, no path), a sha256 of 64 hex digits, an install dir Pyodide knows.
    pub fn parse(json: &serde_json::Value) -> Result<Lock, String> {
        let lock: Lock = serde_json::from_value(json.clone())
            .map_err(|e| format!("it is not a Pyodide lock (pyodide-lock.json): {e}"))?;
        for (key, package) in &lock.packages {
            package.check().map_err(|why| format!("its package {key:?} {why}"))?;
        }
        Ok(lock)
    }

    /// The package a name (any spelling PEP 503 deems equal) stands for.
    pub fn get(&self, name: &str) -> Option<&LockPackage> {
        let key = canonical_name(name);
        self.packages.get(name).or_else(|| self.packages.iter().find(|(k, _)| canonical_name(k) == key).map(|(_, p)| p))
    }
}

impl LockPackage {
    fn check(&self) -> Result<(), String> {
        let file_ok = self.file_name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
            && !self.file_name.starts_with('.')
            && (self.file_name.ends_with(".whl") || self.file_name.ends_with(".zip"));
        if !file_ok {
            return Err(format!("has file_name {:?}: expected a .whl or .zip name without a path", self.file_name));
        }
        if self.sha256.len() != 64 || !self.sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(format!("has sha256 {:?}: expected 64 lowercase hex digits", self.sha256));
        }
        if !matches!(self.install_dir.as_str(), "site" | "dynlib") {
            return Err(format!("has install_dir {:?}: expected \"site\" or \"dynlib\"", self.install_dir));
        }
        Version::parse(&self.version).map(|_| ()).map_err(|e| format!("has version {e}"))
    }

    pub fn version(&self) -> Version {
        Version::parse(&self.version).expect("checked by Lock::parse")
    }

    /// Where the deps layer keeps its file: shared libraries apart, so the runner loads them
    /// first and into the library directory.
    pub fn layer_path(&self) -> String {
        match self.install_dir.as_str() {
            "dynlib" => format!("wheels/dynlib/{}", self.file_name),
            _ => format!("wheels/{}", self.file_name),
        }
    }
}
