//! Wheel file names (`msgpack-1.2.4-cp314-cp314-pyemscripten_2026_0_wasm32.whl`) and whether,
//! and how well, a wheel fits a runtime: the rank of its best tag in the runtime's list, as
//! pip prefers the most specific wheel.
//!
//! <https://packaging.python.org/en/latest/specifications/binary-distribution-format/>

use super::name::canonical_name;
use super::runtime::Runtime;
use super::version::Version;

#[derive(Debug, Clone)]
pub struct WheelName {
    /// The project, canonical.
    pub project: String,
    pub version: Version,
    /// Every (python, abi, platform) the compressed tag sets expand to (`py2.py3-none-any` is two).
    pub tags: Vec<(String, String, String)>,
}

impl WheelName {
    pub fn parse(filename: &str) -> Result<WheelName, String> {
        let refuse = |why: &str| Err(format!("{filename:?} is not a wheel file name: {why}"));
        let Some(stem) = filename.strip_suffix(".whl") else { return refuse("it does not end in .whl") };
        let parts: Vec<&str> = stem.split('-').collect();
        let [name, version, .., python, abi, platform] = parts[..] else {
            return refuse("it has fewer than five - separated parts (name-version-python-abi-platform)");
        };
        if parts.len() > 6 || parts.iter().any(|p| p.is_empty()) {
            return refuse("it has more than six parts or an empty one");
        }
        let version = Version::parse(version).map_err(|e| format!("{filename:?} is not a wheel file name: {e}"))?;
        let mut tags = Vec::new();
        for p in python.split('.') {
            for a in abi.split('.') {
                for pl in platform.split('.') {
                    tags.push((p.to_owned(), a.to_owned(), pl.to_owned()));
                }
            }
        }
        Ok(WheelName { project: canonical_name(name), version, tags })
    }

    /// The index of this wheel's best tag among `tags` (a runtime's, best first): lower is
    /// better; `None` when the runtime cannot install it.
    pub fn rank(&self, tags: &[(String, String, String)]) -> Option<usize> {
        self.tags.iter().filter_map(|tag| tags.iter().position(|t| t == tag)).min()
    }

    /// Whether it is pure Python (`none` ABI, `any` platform) for Python 3 on any tag.
    pub fn is_pure(&self) -> bool {
        self.tags.iter().any(|(_, abi, platform)| abi == "none" && platform == "any")
    }

    /// Its tag sets as written (`cp313-cp313-pyemscripten_2025_0_wasm32`), for messages.
    pub fn tag_text(filename: &str) -> String {
        let stem = filename.strip_suffix(".whl").unwrap_or(filename);
        let parts: Vec<&str> = stem.split('-').collect();
        parts[parts.len().saturating_sub(3)..].join("-")
    }
}

/// What a runtime needs, for a refusal: its best platform tag and the pure-Python one.
pub fn needed_tags(runtime: &Runtime) -> String {
    let cp = runtime.interpreter();
    let [platform, _] = runtime.platforms();
    format!("{cp}-{cp}-{platform} (or {cp}-abi3-{platform}, or pure Python: py3-none-any)")
}
