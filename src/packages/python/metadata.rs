//! A wheel's core metadata (`<name>.dist-info/METADATA`): the email-style header block, of
//! which a build reads `Name`, `Version`, `Requires-Python` and every `Requires-Dist`.
//!
//! <https://packaging.python.org/en/latest/specifications/core-metadata/>

/// The largest METADATA header block read (the description after it is never looked at).
pub const MAX_METADATA_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoreMetadata {
    pub name: String,
    pub version: String,
    pub requires_python: Option<String>,
    /// Each `Requires-Dist` as written, in order.
    pub requires_dist: Vec<String>,
}

impl CoreMetadata {
    /// Reads the headers up to the first empty line; a header's continuation lines (starting
    /// with a space or a tab) are joined to it.
    pub fn parse(text: &str) -> Result<CoreMetadata, String> {
        let mut headers: Vec<(String, String)> = Vec::new();
        let mut read = 0;
        for line in text.lines() {
            read += line.len() + 1;
            if read > MAX_METADATA_BYTES {
                return Err(format!("its METADATA headers are longer than {MAX_METADATA_BYTES} bytes"));
            }
            if line.trim().is_empty() {
                break;
            }
            if line.starts_with([' ', '\t']) {
                if let Some((_, value)) = headers.last_mut() {
                    value.push(' ');
                    value.push_str(line.trim());
                }
                continue;
            }
            let (name, value) = line
                .split_once(':')
                .ok_or_else(|| format!("its METADATA line {line:?} is not a \"Name: value\" header"))?;
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
        let first = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        let metadata = CoreMetadata {
            name: first("name").ok_or("its METADATA has no Name")?,
            version: first("version").ok_or("its METADATA has no Version")?,
            requires_python: first("requires-python").filter(|v| !v.is_empty()),
            requires_dist: headers.iter().filter(|(n, _)| n == "requires-dist").map(|(_, v)| v.clone()).collect(),
        };
        Ok(metadata)
    }
}
