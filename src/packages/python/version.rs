//! PEP 440 versions and version specifiers, as `packaging` (what pip uses) reads and orders
//! them: `1.0`, `2!1.0rc1.post2.dev3+local.7`, `>=1.6,<2`, `~=2.2`, `==1.4.*`.
//!
//! <https://packaging.python.org/en/latest/specifications/version-specifiers/>

use std::cmp::Ordering;
use std::fmt;

/// The longest version string read; longer ones are refused rather than parsed.
const MAX_VERSION_LEN: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PreKind {
    Alpha,
    Beta,
    Rc,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum LocalPart {
    // Declared first: PEP 440 orders a letter segment before any number.
    Text(String),
    Number(u64),
}

/// A PEP 440 version, normalized (`1.0-RC_1` is `1.0rc1`). Ordered and compared as PEP 440
/// says: `1.0 == 1.0.0`, `1.0.dev0 < 1.0a1 < 1.0 < 1.0.post1`, a local label after its public
/// version.
#[derive(Debug, Clone)]
pub struct Version {
    epoch: u64,
    release: Vec<u64>,
    pre: Option<(PreKind, u64)>,
    post: Option<u64>,
    dev: Option<u64>,
    local: Vec<LocalPart>,
}

impl Version {
    /// Parses a version in any form PEP 440 normalizes (`v1.0`, `1.0-1`, `1.0.RC1`).
    pub fn parse(text: &str) -> Result<Version, String> {
        if text.len() > MAX_VERSION_LEN {
            return Err(format!("a version of {} bytes is too long (at most {MAX_VERSION_LEN})", text.len()));
        }
        let lower = text.trim().to_ascii_lowercase();
        let mut cursor = Cursor { text: lower.strip_prefix('v').unwrap_or(&lower), at: 0 };
        let version = cursor.version().ok_or_else(|| format!("{text:?} is not a PEP 440 version"))?;
        if cursor.rest().is_empty() {
            Ok(version)
        } else {
            Err(format!("{text:?} is not a PEP 440 version"))
        }
    }

    pub fn release(&self) -> &[u64] {
        &self.release
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// A pre-release or development release (`1.0a1`, `1.0.dev0`).
    pub fn is_prerelease(&self) -> bool {
        self.pre.is_some() || self.dev.is_some()
    }

    pub fn is_postrelease(&self) -> bool {
        self.post.is_some()
    }

    pub fn has_local(&self) -> bool {
        !self.local.is_empty()
    }

    /// This version without its local label.
    pub fn public(&self) -> Version {
        Version { local: Vec::new(), ..self.clone() }
    }

    /// Epoch and release only (`1.0rc1.post2` -> `1.0`).
    pub fn base(&self) -> Version {
        Version {
            epoch: self.epoch,
            release: self.release.clone(),
            pre: None,
            post: None,
            dev: None,
            local: Vec::new(),
        }
    }

    /// The release with trailing zeros dropped, as PEP 440 compares releases.
    fn trimmed_release(&self) -> &[u64] {
        let end = self.release.iter().rposition(|&n| n != 0).map_or(0, |i| i + 1);
        &self.release[..end]
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        // packaging's _cmpkey: a dev release with no pre or post sorts before every pre-release
        // of its release; no pre-release sorts after all of them; no post before any post; no
        // dev after any dev; no local label before any.
        let pre_key = |v: &Version| match (v.pre, v.post, v.dev) {
            (None, None, Some(_)) => (0, None),
            (None, _, _) => (2, None),
            (Some(pre), _, _) => (1, Some(pre)),
        };
        let post_key = |v: &Version| v.post.map_or((0, 0), |n| (1, n));
        let dev_key = |v: &Version| v.dev.map_or((1, 0), |n| (0, n));
        self.epoch
            .cmp(&other.epoch)
            .then_with(|| self.trimmed_release().cmp(other.trimmed_release()))
            .then_with(|| pre_key(self).cmp(&pre_key(other)))
            .then_with(|| post_key(self).cmp(&post_key(other)))
            .then_with(|| dev_key(self).cmp(&dev_key(other)))
            .then_with(|| self.local.cmp(&other.local))
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

impl fmt::Display for Version {
    /// The normalized form: `1!2.0rc1.post3.dev4+ubuntu.1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.epoch != 0 {
            write!(f, "{}!", self.epoch)?;
        }
        let release: Vec<String> = self.release.iter().map(u64::to_string).collect();
        f.write_str(&release.join("."))?;
        if let Some((kind, n)) = self.pre {
            let label = match kind {
                PreKind::Alpha => "a",
                PreKind::Beta => "b",
                PreKind::Rc => "rc",
            };
            write!(f, "{label}{n}")?;
        }
        if let Some(n) = self.post {
            write!(f, ".post{n}")?;
        }
        if let Some(n) = self.dev {
            write!(f, ".dev{n}")?;
        }
        if !self.local.is_empty() {
            let parts: Vec<String> = self
                .local
                .iter()
                .map(|part| match part {
                    LocalPart::Text(text) => text.clone(),
                    LocalPart::Number(n) => n.to_string(),
                })
                .collect();
            write!(f, "+{}", parts.join("."))?;
        }
        Ok(())
    }
}

/// A hand-written reader of PEP 440's normalization grammar over lowercase text.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn number(&mut self) -> Option<u64> {
        let digits = self.rest().bytes().take_while(u8::is_ascii_digit).count();
        let value = self.rest()[..digits].parse().ok()?;
        self.at += digits;
        Some(value)
    }

    fn eat(&mut self, prefix: &str) -> bool {
        let found = self.rest().starts_with(prefix);
        if found {
            self.at += prefix.len();
        }
        found
    }

    fn separator(&mut self) -> bool {
        self.eat(".") || self.eat("-") || self.eat("_")
    }

    /// Runs `read` from here; on `None` puts the cursor back.
    fn attempt<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        let start = self.at;
        let found = read(self);
        if found.is_none() {
            self.at = start;
        }
        found
    }

    fn version(&mut self) -> Option<Version> {
        let epoch = self.attempt(|c| c.number().filter(|_| c.eat("!"))).unwrap_or(0);
        let mut release = vec![self.number()?];
        while let Some(n) = self.attempt(|c| if c.eat(".") { c.number() } else { None }) {
            release.push(n);
        }
        let pre = self.attempt(Self::pre);
        let post = self.attempt(Self::post);
        let dev = self.attempt(Self::dev);
        let local = if self.eat("+") { self.local()? } else { Vec::new() };
        Some(Version { epoch, release, pre, post, dev, local })
    }

    fn pre(&mut self) -> Option<(PreKind, u64)> {
        self.separator();
        let labels = [
            ("alpha", PreKind::Alpha),
            ("a", PreKind::Alpha),
            ("beta", PreKind::Beta),
            ("b", PreKind::Beta),
            ("preview", PreKind::Rc),
            ("pre", PreKind::Rc),
            ("rc", PreKind::Rc),
            ("c", PreKind::Rc),
        ];
        let kind = labels.iter().find(|(label, _)| self.eat(label))?.1;
        Some((kind, self.implicit_number()))
    }

    fn post(&mut self) -> Option<u64> {
        if let Some(n) = self.attempt(|c| if c.eat("-") { c.number() } else { None }) {
            return Some(n);
        }
        self.separator();
        ["post", "rev", "r"].iter().any(|label| self.eat(label)).then(|| self.implicit_number())
    }

    fn dev(&mut self) -> Option<u64> {
        self.separator();
        self.eat("dev").then(|| self.implicit_number())
    }

    /// The number after a label (`rc1`, `rc.1`, `rc-1`), 0 when there is none (`rc`).
    fn implicit_number(&mut self) -> u64 {
        self.attempt(|c| {
            c.separator();
            c.number()
        })
        .unwrap_or(0)
    }

    fn local(&mut self) -> Option<Vec<LocalPart>> {
        let length = self.rest().bytes().take_while(|b| b.is_ascii_alphanumeric() || b"._-".contains(b)).count();
        let text = &self.rest()[..length];
        self.at += length;
        text.split(['.', '_', '-'])
            .map(|part| match part {
                "" => None,
                digits if digits.bytes().all(|b| b.is_ascii_digit()) => digits.parse().ok().map(LocalPart::Number),
                text => Some(LocalPart::Text(text.to_owned())),
            })
            .collect()
    }
}

/// A comparison operator of a version specifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Compatible,
    Equal,
    NotEqual,
    LessEqual,
    GreaterEqual,
    Less,
    Greater,
    Arbitrary,
}

impl Operator {
    const ALL: [(&'static str, Operator); 8] = [
        ("===", Operator::Arbitrary),
        ("~=", Operator::Compatible),
        ("==", Operator::Equal),
        ("!=", Operator::NotEqual),
        ("<=", Operator::LessEqual),
        (">=", Operator::GreaterEqual),
        ("<", Operator::Less),
        (">", Operator::Greater),
    ];

    pub fn as_str(self) -> &'static str {
        Operator::ALL.iter().find(|(_, op)| *op == self).map_or("", |(text, _)| text)
    }

    /// The operator `text` starts with, and the rest.
    pub fn split(text: &str) -> Option<(Operator, &str)> {
        Operator::ALL.iter().find_map(|(prefix, op)| text.strip_prefix(prefix).map(|rest| (*op, rest)))
    }
}

/// One version specifier: `>=1.6`, `==2.*`, `~=1.4.2`.
#[derive(Debug, Clone)]
pub struct Specifier {
    op: Operator,
    version: Version,
    /// `==1.4.*` / `!=1.4.*`
    wildcard: bool,
    /// The version as written, for `===` and messages.
    text: String,
}

impl Specifier {
    pub fn parse(text: &str) -> Result<Specifier, String> {
        let trimmed = text.trim();
        let (op, rest) = Operator::split(trimmed).ok_or_else(|| {
            format!(
                "{trimmed:?} is not a version specifier: it does not start with one of ==, !=, >=, <=, >, <, ~=, ==="
            )
        })?;
        let written = rest.trim();
        let refuse = |why: &str| Err(format!("{trimmed:?} is not a version specifier: {why}"));
        if op == Operator::Arbitrary {
            if written.is_empty() || written.contains(char::is_whitespace) {
                return refuse("=== takes one version string");
            }
            let version = Version::parse(written).unwrap_or_else(|_| Version::parse("0").expect("0 parses"));
            return Ok(Specifier { op, version, wildcard: false, text: written.to_owned() });
        }
        let (base, wildcard) = match written.strip_suffix(".*") {
            Some(base) => (base, true),
            None => (written, false),
        };
        let version = Version::parse(base).map_err(|e| format!("{trimmed:?} is not a version specifier: {e}"))?;
        if wildcard && !matches!(op, Operator::Equal | Operator::NotEqual) {
            return refuse("only == and != take a .* suffix");
        }
        if wildcard && (version.is_prerelease() || version.is_postrelease() || version.has_local()) {
            return refuse("a .* suffix follows a release number only (e.g. ==1.4.*)");
        }
        if version.has_local() && !matches!(op, Operator::Equal | Operator::NotEqual) {
            return refuse("only == and != accept a local version label (+...)");
        }
        if op == Operator::Compatible && version.release.len() < 2 {
            return refuse("~= needs at least two release numbers (e.g. ~=1.4)");
        }
        Ok(Specifier { op, version, wildcard, text: written.to_owned() })
    }

    pub fn operator(&self) -> Operator {
        self.op
    }

    /// Whether this specifier itself names a pre-release (then pre-releases may match it).
    pub fn names_prerelease(&self) -> bool {
        self.version.is_prerelease()
    }

    /// Whether it pins exactly one version (`==1.2.3`, `===1.2.3`).
    pub fn pins(&self) -> bool {
        matches!(self.op, Operator::Arbitrary) || (self.op == Operator::Equal && !self.wildcard)
    }

    /// Whether `candidate` matches, as packaging's `Specifier.contains(prereleases=True)`.
    pub fn contains(&self, candidate: &Version) -> bool {
        let spec = &self.version;
        let public = candidate.public();
        match self.op {
            Operator::Arbitrary => candidate.to_string().eq_ignore_ascii_case(&self.text),
            Operator::Equal => self.equal(candidate),
            Operator::NotEqual => !self.equal(candidate),
            Operator::LessEqual => public <= *spec,
            Operator::GreaterEqual => public >= *spec,
            // `<1.7` excludes 1.7's own pre-releases unless it names one.
            Operator::Less => {
                public < *spec
                    && !(!spec.is_prerelease() && candidate.is_prerelease() && candidate.base() == spec.base())
            }
            // `>1.7` excludes 1.7's post-releases (unless it names one) and local versions.
            Operator::Greater => {
                public > *spec
                    && !(!spec.is_postrelease() && candidate.is_postrelease() && candidate.base() == spec.base())
                    && !(candidate.has_local() && candidate.base() == spec.base())
            }
            Operator::Compatible => {
                let prefix = &spec.release[..spec.release.len() - 1];
                public >= *spec && candidate.epoch == spec.epoch && padded_starts_with(&candidate.release, prefix)
            }
        }
    }

    fn equal(&self, candidate: &Version) -> bool {
        let spec = &self.version;
        if self.wildcard {
            candidate.epoch == spec.epoch && padded_starts_with(&candidate.release, &spec.release)
        } else if spec.has_local() {
            candidate == spec
        } else {
            candidate.public() == *spec
        }
    }
}

/// Whether `release`, padded with zeros to `prefix`'s length, starts with `prefix`.
fn padded_starts_with(release: &[u64], prefix: &[u64]) -> bool {
    prefix.iter().enumerate().all(|(i, n)| release.get(i).copied().unwrap_or(0) == *n)
}

impl fmt::Display for Specifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.op.as_str(), self.text)
    }
}

/// Comma-separated specifiers, all of which must match (empty: any version).
#[derive(Debug, Clone, Default)]
pub struct SpecifierSet(pub Vec<Specifier>);

impl SpecifierSet {
    pub fn parse(text: &str) -> Result<SpecifierSet, String> {
        text.split(',')
            .filter(|part| !part.trim().is_empty())
            .map(Specifier::parse)
            .collect::<Result<_, _>>()
            .map(SpecifierSet)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, candidate: &Version) -> bool {
        self.0.iter().all(|spec| spec.contains(candidate))
    }

    pub fn names_prerelease(&self) -> bool {
        self.0.iter().any(Specifier::names_prerelease)
    }

    pub fn pins(&self) -> bool {
        self.0.iter().any(Specifier::pins)
    }
}

impl fmt::Display for SpecifierSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(Specifier::to_string).collect();
        f.write_str(&parts.join(","))
    }
}
