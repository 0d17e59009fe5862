//! Where a tenant's builds get packages: an npm registry, a Python package index (its JSON
//! API), the host of that index's files, and Pyodide's distribution (its files, and optionally
//! a lock of the tenant's own). A tab reaches them only through the Worker's `/registry` route,
//! which fetches nothing outside these bases.
//!
//! The decision is made on the URL as a WHATWG parser produces it, never on the string before
//! it: the parser drops tabs and newlines, resolves `..` and `%2e%2e` segments and turns `\`
//! into `/`, so `npm/.%09./secret` is `/secret` once parsed. [`PackageSources::admit`] hands
//! back that parsed URL, and the route fetches exactly it.

use percent_encoding::percent_decode_str;
use serde::{Deserialize, Serialize};
use url::Url;

/// The version of the `pyodide` npm package the page serves (`tests/packages_python.rs`
/// checks it against node_modules): its distribution's files are under its version on the CDN.
pub const PYODIDE_VERSION: &str = "314.0.7";

/// A tenant's package sources (`defaults.packages`); absolute `http(s)://` bases, no trailing `/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PackageSources {
    pub npm_registry: String,
    pub pypi_index: String,
    pub pypi_files: String,
    /// Where the files of Pyodide's distribution are (`<pyodideIndex>/<file_name>`).
    pub pyodide_index: String,
    /// The URL of a `pyodide-lock.json` whose sha256 values the distribution's files are checked
    /// against; empty: the lock shipped with the runtime.
    pub pyodide_lock: String,
}

impl Default for PackageSources {
    /// The public npm registry, PyPI, and Pyodide's CDN for the version the page serves.
    fn default() -> Self {
        PackageSources {
            npm_registry: "https://registry.npmjs.org".into(),
            pypi_index: "https://pypi.org".into(),
            pypi_files: "https://files.pythonhosted.org".into(),
            pyodide_index: format!("https://cdn.jsdelivr.net/pyodide/v{PYODIDE_VERSION}/full"),
            pyodide_lock: String::new(),
        }
    }
}

/// A URL [`PackageSources::admit`] let through: the parsed URL to fetch, and the source it
/// lies under (its field in `defaults.packages`, and its base), for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted<'a> {
    pub url: Url,
    pub field: &'static str,
    pub base: &'a str,
}

/// Most rounds of percent-decoding a path segment gets to show what it hides (`%252e` is `%2e`
/// is `.`); a segment still changing after them is refused.
const DECODE_ROUNDS: usize = 4;

impl PackageSources {
    /// Each source's field and URL (`pyodideLock` only when set).
    fn bases(&self) -> Vec<(&'static str, &str)> {
        let mut bases = vec![
            ("npmRegistry", self.npm_registry.as_str()),
            ("pypiIndex", &self.pypi_index),
            ("pypiFiles", &self.pypi_files),
            ("pyodideIndex", &self.pyodide_index),
        ];
        if !self.pyodide_lock.is_empty() {
            bases.push(("pyodideLock", &self.pyodide_lock));
        }
        bases
    }

    /// The parsed `url`, if it lies under one of the bases: the same scheme, host and port, no
    /// credentials or fragment, the base's path segments first, and no segment that, percent-decoded
    /// (repeatedly), holds a `.` or `..` part between `/` or `\`, or a control character (an
    /// upstream that decodes once more must not climb out either). Otherwise why not, naming
    /// the URL as parsed and the sources.
    pub fn admit(&self, url: &str) -> Result<Admitted<'_>, String> {
        let parsed = Url::parse(url).map_err(|e| format!("{url:?} is not an absolute URL ({e})"))?;
        if let Some(why) = hidden_climb(&parsed) {
            return Err(format!("{parsed} is refused: {why}"));
        }
        let under = self.bases().into_iter().find(|(_, base)| Url::parse(base).is_ok_and(|b| lies_under(&parsed, &b)));
        match under {
            Some((field, base)) => Ok(Admitted { url: parsed, field, base }),
            None => {
                let bases: Vec<&str> = self.bases().into_iter().map(|(_, base)| base).collect();
                Err(format!(
                    "{parsed} is not under this tenant's package sources ({}); an admin sets them in defaults.packages",
                    bases.join(", ")
                ))
            }
        }
    }

    /// Refuses a base that is not an absolute `http(s)` URL without a trailing `/`, naming it
    /// (`pyodideLock` may be empty).
    pub fn validate(&self) -> Result<(), String> {
        for (name, base) in self.bases() {
            let scheme_ok = base.starts_with("https://") || base.starts_with("http://");
            let host = base.split_once("://").map_or("", |(_, rest)| rest);
            let parses = Url::parse(base).is_ok_and(|u| u.host().is_some() && hidden_climb(&u).is_none());
            if !scheme_ok || !parses || host.is_empty() || base.ends_with('/') || base.contains(['@', '#', '?', ' ']) {
                let example = match name {
                    "pyodideLock" => "https://mirror.example/pyodide/pyodide-lock.json",
                    "pyodideIndex" => "https://mirror.example/pyodide",
                    _ => "https://registry.npmjs.org",
                };
                return Err(format!(
                    "packages.{name}: {base:?} must be an absolute http(s) URL with no trailing \"/\", query or credentials, e.g. \"{example}\""
                ));
            }
        }
        Ok(())
    }
}

/// Whether parsed `url` is on `base`'s origin, without credentials or fragment, with the base's
/// path segments as its first ones.
fn lies_under(url: &Url, base: &Url) -> bool {
    let same_origin = url.scheme() == base.scheme()
        && url.host() == base.host()
        && url.port_or_known_default() == base.port_or_known_default();
    let clean = url.username().is_empty() && url.password().is_none() && url.fragment().is_none();
    let base_path: Vec<&str> = base.path_segments().into_iter().flatten().filter(|s| !s.is_empty()).collect();
    let path: Vec<&str> = url.path_segments().into_iter().flatten().collect();
    same_origin && clean && path.len() >= base_path.len() && path[..base_path.len()] == base_path[..]
}

/// Why a parsed URL's path could still climb for a server that decodes it, if it could.
fn hidden_climb(url: &Url) -> Option<String> {
    url.path_segments().into_iter().flatten().find_map(|segment| {
        let Some(decoded) = fully_decoded(segment) else {
            return Some(format!("path segment {segment:?} is percent-encoded over and over"));
        };
        let climbs = decoded.split(['/', '\\']).any(|part| part == "." || part == "..");
        (climbs || decoded.chars().any(char::is_control)).then(|| {
            format!("path segment {segment:?} decodes to {decoded:?}, which holds a dot segment or a control character")
        })
    })
}

/// `segment` percent-decoded until it stops changing; `None` when it still changes after
/// [`DECODE_ROUNDS`].
fn fully_decoded(segment: &str) -> Option<String> {
    let mut text = segment.to_owned();
    for _ in 0..DECODE_ROUNDS {
        let next = percent_decode_str(&text).decode_utf8_lossy().into_owned();
        if next == text {
            return Some(text);
        }
        text = next;
    }
    None
}
