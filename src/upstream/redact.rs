//! Keeping a tenant's upstream credentials out of what the upstream says back. An upstream may
//! quote its request headers anywhere (a JSON-RPC error, a tool result, a tool's description),
//! and whatever it says reaches guest code; so every answer is redacted before anything reads
//! it ([`super::client::Exchange`] does it to each answer), and so is every message the Worker
//! writes about a call (a redirect's `Location`, a fetch error).
//!
//! For each opened header value, what is removed is every form in which it could come back:
//! the value; its credential after an auth scheme (`Bearer <token>`, and for `Basic` the
//! decoded `user:password` and the password); each of those JSON-escaped and percent-encoded;
//! and their base64 (standard and URL-safe, padded or not) at each of the three alignments a
//! value can have inside a longer base64 text (only the characters that depend on the value
//! alone, so a quoted header line encoded whole loses them too). Forms shorter than
//! [`MIN_FORM_LEN`] are left alone: they would match ordinary text and no credential is that short.

use std::borrow::Cow;

use aho_corasick::{AhoCorasick, MatchKind};
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// What a removed form becomes.
pub const REDACTED: &str = "***";
/// The shortest form removed.
pub const MIN_FORM_LEN: usize = 6;

/// What percent-encoders commonly leave alone besides letters and digits: nothing, RFC 3986's
/// unreserved marks (Python's `quote`, most URL libraries), and JavaScript's
/// `encodeURIComponent`'s.
const PERCENT_ENCODINGS: [&AsciiSet; 3] = [
    NON_ALPHANUMERIC,
    &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~'),
    &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~')
        .remove(b'!')
        .remove(b'*')
        .remove(b'\'')
        .remove(b'(')
        .remove(b')'),
];

/// Removes a set of secrets, in all their forms, from upstream text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Every form, the longest winning where several match; `None`: nothing to remove.
    forms: Option<AhoCorasick>,
}

impl Redactor {
    /// A redactor of the values of `headers` (name, opened value).
    pub fn of(headers: &[(String, String)]) -> Self {
        let mut forms: Vec<String> = headers.iter().flat_map(|(_, value)| secrets(value)).flat_map(encodings).collect();
        forms.retain(|form| form.len() >= MIN_FORM_LEN);
        forms.sort();
        forms.dedup();
        if forms.is_empty() {
            return Redactor { forms: None };
        }
        // Header values are at most `MAX_HEADER_VALUE` bytes: far below the automaton's limits.
        let automaton = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&forms);
        Redactor { forms: Some(automaton.expect("a few hundred KiB of literals build")) }
    }

    /// `bytes` with every form replaced by [`REDACTED`].
    pub fn bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        match &self.forms {
            Some(forms) if forms.is_match(bytes) => {
                let mut redacted = Vec::with_capacity(bytes.len());
                forms.replace_all_with_bytes(bytes, &mut redacted, |_, _, out| {
                    out.extend_from_slice(REDACTED.as_bytes());
                    true
                });
                Cow::Owned(redacted)
            }
            _ => Cow::Borrowed(bytes),
        }
    }

    /// `text` with every form replaced by [`REDACTED`].
    pub fn text(&self, text: &str) -> String {
        // Forms are whole UTF-8 strings and UTF-8 synchronizes itself, so a match never splits
        // a character, and what remains is UTF-8.
        String::from_utf8(self.bytes(text.as_bytes()).into_owned()).expect("redacting keeps UTF-8 whole")
    }
}

/// The secrets in one header value: the value, and after an auth scheme its credential (with
/// `Basic`'s decoded `user:password` and the password).
fn secrets(value: &str) -> Vec<String> {
    let value = value.trim();
    let mut found = vec![value.to_owned()];
    let Some((scheme, credential)) = value.split_once([' ', '\t']) else { return found };
    let credential = credential.trim();
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if scheme.is_empty() || !scheme.bytes().all(token) || credential.is_empty() {
        return found;
    }
    found.push(credential.to_owned());
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = STANDARD.decode(credential).ok().and_then(|bytes| String::from_utf8(bytes).ok());
        if let Some(user_password) = decoded {
            found.extend(user_password.split_once(':').map(|(_, password)| password.to_owned()));
            found.push(user_password);
        }
    }
    found
}

/// The forms one secret can take in an answer.
fn encodings(secret: String) -> Vec<String> {
    let json = serde_json::to_string(&secret).expect("a string serializes");
    let json = json[1..json.len() - 1].to_owned();
    let mut forms = vec![json.replace('/', "\\/"), json];
    for set in PERCENT_ENCODINGS {
        let encoded = utf8_percent_encode(&secret, set).to_string();
        forms.push(lowercase_escapes(&encoded));
        forms.push(encoded);
    }
    forms.push(STANDARD.encode(&secret));
    forms.push(URL_SAFE.encode(&secret));
    for shift in 0..3 {
        forms.extend(base64_core(secret.as_bytes(), shift));
    }
    forms.push(secret);
    forms
}

/// `%2B` as `%2b`: encoders differ in the case of their hex digits.
fn lowercase_escapes(encoded: &str) -> String {
    let mut out = String::with_capacity(encoded.len());
    let mut hex_left = 0u8;
    for c in encoded.chars() {
        out.push(if hex_left > 0 { c.to_ascii_lowercase() } else { c });
        hex_left = if c == '%' { 2 } else { hex_left.saturating_sub(1) };
    }
    out
}

/// The base64 characters (standard and URL-safe) that depend on `secret` alone when it starts
/// `shift` bytes past a 3-byte boundary of a longer base64 text.
fn base64_core(secret: &[u8], shift: usize) -> [String; 2] {
    let shifted = [&vec![0; shift][..], secret].concat();
    let (start, end) = ((8 * shift).div_ceil(6), 8 * (shift + secret.len()) / 6);
    [STANDARD_NO_PAD, URL_SAFE_NO_PAD].map(|engine| engine.encode(&shifted)[start..end].to_owned())
}
