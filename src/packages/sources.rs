//! Where a tenant's builds get packages: an npm registry, a Python package index (its JSON
//! API) and the host of that index's files. A tab reaches them only through the Worker's
//! `/registry` route, which fetches nothing outside these bases.

use serde::{Deserialize, Serialize};

/// A tenant's package sources (`defaults.packages`); absolute `http(s)://` bases, no trailing `/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PackageSources {
    pub npm_registry: String,
    pub pypi_index: String,
    pub pypi_files: String,
}

impl Default for PackageSources {
    /// The public npm registry and PyPI.
    fn default() -> Self {
        PackageSources {
            npm_registry: "https://registry.npmjs.org".into(),
            pypi_index: "https://pypi.org".into(),
            pypi_files: "https://files.pythonhosted.org".into(),
        }
    }
}

impl PackageSources {
    /// Whether `url` lies under one of the bases (an exact base, or below it after a `/`), so the
    /// registry route may fetch it. The `/` after the base ends its authority, so an `@` after
    /// it is path (scoped npm packages have one). A fragment, a backslash or a `..` segment
    /// (also percent-encoded, which URL parsers resolve) never passes: they could leave a base's path.
    pub fn admits(&self, url: &str) -> bool {
        let dot_dot = url.split('/').any(|s| s == "..") || url.to_ascii_lowercase().contains("%2e");
        if dot_dot || url.contains(['#', '\\']) {
            return false;
        }
        [&self.npm_registry, &self.pypi_index, &self.pypi_files]
            .into_iter()
            .any(|base| url.strip_prefix(base.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
    }

    /// Refuses a base that is not an absolute `http(s)` URL without a trailing `/`, naming it.
    pub fn validate(&self) -> Result<(), String> {
        for (name, base) in
            [("npmRegistry", &self.npm_registry), ("pypiIndex", &self.pypi_index), ("pypiFiles", &self.pypi_files)]
        {
            let scheme_ok = base.starts_with("https://") || base.starts_with("http://");
            let host = base.split_once("://").map_or("", |(_, rest)| rest);
            if !scheme_ok || host.is_empty() || base.ends_with('/') || base.contains(['@', '#', '?', ' ']) {
                return Err(format!(
                    "packages.{name}: {base:?} must be an absolute http(s) URL with no trailing \"/\", query or credentials, e.g. \"https://registry.npmjs.org\""
                ));
            }
        }
        Ok(())
    }
}
