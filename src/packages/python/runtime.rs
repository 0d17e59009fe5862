//! The Python runtime that runs a capsule, as its Pyodide lock's `info` describes it
//! (`{"python": "3.14.2", "abi_version": "2026_0", "platform": "emscripten_5_0_3", "arch":
//! "wasm32"}`): the wheel tags it installs, best first, and the values its markers see. Nothing
//! here names a version: it is all read from the lock the runtime ships with.

use super::marker::Environment;
use serde::Deserialize;

/// A lock's `info`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LockInfo {
    pub python: String,
    pub abi_version: String,
    pub platform: String,
    pub arch: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    pub info: LockInfo,
    major: u32,
    minor: u32,
}

impl Runtime {
    pub fn new(info: LockInfo) -> Result<Runtime, String> {
        let mut numbers = info.python.split('.').map(str::parse::<u32>);
        let (Some(Ok(major)), Some(Ok(minor))) = (numbers.next(), numbers.next()) else {
            return Err(format!("the lock's info.python {:?} is not a Python version like \"3.14.2\"", info.python));
        };
        let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !word(&info.abi_version) || !word(&info.platform) || !word(&info.arch) {
            return Err(format!(
                "the lock's info ({:?}, {:?}, {:?}) is not an ABI, platform and arch of letters, digits and _",
                info.abi_version, info.platform, info.arch
            ));
        }
        Ok(Runtime { info, major, minor })
    }

    /// `cp314`
    pub fn interpreter(&self) -> String {
        format!("cp{}{}", self.major, self.minor)
    }

    /// The platform tags, best first: PEP 783's `pyemscripten_<abi>_<arch>`, then the generic
    /// `emscripten_<version>_<arch>` (`sysconfig.get_platform()`), as packaging lists them.
    pub fn platforms(&self) -> [String; 2] {
        let LockInfo { abi_version, platform, arch, .. } = &self.info;
        [format!("pyemscripten_{abi_version}_{arch}"), format!("{platform}_{arch}")]
    }

    /// Every wheel tag (python, abi, platform) this runtime installs, most specific first, in
    /// the order of packaging's `sys_tags()` for CPython on Emscripten: `cpython_tags` (its
    /// own ABI, abi3, none, then abi3 of older minor versions) and `compatible_tags` (py*-none
    /// on its platforms, cpXY-none-any, py*-none-any).
    pub fn tags(&self) -> Vec<(String, String, String)> {
        let cp = self.interpreter();
        let platforms = self.platforms();
        let mut tags = Vec::new();
        let mut each_platform = |python: &str, abi: &str| {
            for platform in &platforms {
                tags.push((python.to_owned(), abi.to_owned(), platform.clone()));
            }
        };
        each_platform(&cp, &cp);
        each_platform(&cp, "abi3");
        each_platform(&cp, "none");
        for minor in (2..self.minor).rev() {
            each_platform(&format!("cp{}{minor}", self.major), "abi3");
        }
        for python in self.py_range() {
            each_platform(&python, "none");
        }
        tags.push((cp, "none".into(), "any".into()));
        for python in self.py_range() {
            tags.push((python, "none".into(), "any".into()));
        }
        tags
    }

    /// `py314`, `py3`, `py313`, ..., `py30` (packaging's `_py_interpreter_range`).
    fn py_range(&self) -> Vec<String> {
        let mut range = vec![format!("py{}{}", self.major, self.minor), format!("py{}", self.major)];
        range.extend((0..self.minor).rev().map(|minor| format!("py{}{minor}", self.major)));
        range
    }

    /// What PEP 508 markers see in this runtime, as Pyodide reports it (`platform.release()`
    /// is the Emscripten version, `platform.version()` is `#1`).
    pub fn environment(&self) -> Environment {
        let emscripten =
            self.info.platform.strip_prefix("emscripten_").unwrap_or(&self.info.platform).replace('_', ".");
        let python = &self.info.python;
        [
            ("implementation_name", "cpython"),
            ("implementation_version", python),
            ("os_name", "posix"),
            ("platform_machine", &self.info.arch),
            ("platform_python_implementation", "CPython"),
            ("platform_release", &emscripten),
            ("platform_system", "Emscripten"),
            ("platform_version", "#1"),
            ("python_full_version", python),
            ("python_version", &format!("{}.{}", self.major, self.minor)),
            ("sys_platform", "emscripten"),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
    }

    /// Names the runtime for messages: `CPython 3.14.2, ABI 2026_0, wasm32`.
    pub fn describe(&self) -> String {
        format!("Pyodide's CPython {}, ABI {}, {}", self.info.python, self.info.abi_version, self.info.arch)
    }

    /// Why another lock cannot serve this runtime, if it cannot: its packages were built for
    /// another ABI, Python or architecture.
    pub fn refuses(&self, other: &LockInfo) -> Option<String> {
        let minor = |python: &str| python.split('.').take(2).collect::<Vec<_>>().join(".");
        let same = other.abi_version == self.info.abi_version
            && other.arch == self.info.arch
            && minor(&other.python) == minor(&self.info.python);
        (!same).then(|| {
            format!(
                "it is for Python {}, ABI {}, {}, and this relay runs {}",
                other.python,
                other.abi_version,
                other.arch,
                self.describe()
            )
        })
    }
}
