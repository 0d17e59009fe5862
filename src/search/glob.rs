//! `filePattern`: shell-style globs over workspace paths, compiled to a `regex` so a match is
//! linear in the path's length whatever the glob (a backtracking glob matcher is exponential in
//! the number of `*`s on some inputs).
//!
//! Syntax:
//! - `*` any run of characters except `/`; `?` one character except `/`;
//! - `[abc]`, `[a-z]`, `[!a]` (or `[^a]`) one character of (or not of) a set, never `/`; a `]`
//!   first in the set is a member (`[]a]`);
//! - `{a,b}` any of the alternatives, which may hold globs, `/` and further braces;
//! - `**` as a whole segment: `**/` any number of directories (`/host/**/*.ts` holds
//!   `/host/a.ts` and `/host/x/y/a.ts`), a trailing `/**` everything below; elsewhere `**` is `*`;
//! - `\c` the character `c` itself (`\*`, `\[`, `\{`).
//!
//! A glob without `/` matches a file's base name (`*.ts`); one with `/` the whole path
//! (`/host/**/*.md`), or, when it does not start with `/`, the path's last segments
//! (`src/*.ts` holds `/host/app/src/main.ts`). `*` matches names starting with `.` too, and
//! matching is case-sensitive.

use super::SearchError;
use regex::{Regex, RegexBuilder};

/// The longest glob taken, in characters.
pub const MAX_GLOB_CHARS: usize = 1000;
/// How deep `{...}` may nest.
const MAX_BRACE_DEPTH: usize = 16;
/// What the compiled glob may take (the translation is linear in the glob's length, so a glob
/// within [`MAX_GLOB_CHARS`] stays far below this).
const GLOB_SIZE_LIMIT: usize = 1 << 20;

/// A compiled `filePattern`.
#[derive(Debug, Clone)]
pub struct Glob {
    regex: Regex,
    /// The glob has no `/`: it matches a path's last segment.
    base_name: bool,
}

impl Glob {
    /// Compiles `pattern`; an error names what to change (unclosed `[` or `{`, a reversed range).
    pub fn new(pattern: &str) -> Result<Glob, SearchError> {
        if pattern.is_empty() {
            return Err(glob_error("is empty; leave filePattern out to search every file"));
        }
        if pattern.chars().count() > MAX_GLOB_CHARS {
            return Err(glob_error(format!("is longer than {MAX_GLOB_CHARS} characters; use a shorter glob")));
        }
        let base_name = !pattern.contains('/');
        let mut translator = Translator { chars: pattern.chars().collect(), pos: 0, at_segment_start: true };
        // A relative path glob may start at any segment; `(?s)` lets `.` take every character.
        let mut source =
            String::from(if base_name || pattern.starts_with('/') { r"(?s)\A" } else { r"(?s)\A(?:.*/)?" });
        translator.sequence(&mut source, 0)?;
        source.push_str(r"\z");
        let regex = RegexBuilder::new(&source)
            .size_limit(GLOB_SIZE_LIMIT)
            .build()
            .map_err(|e| glob_error(format!("could not be compiled ({e}); simplify it")))?;
        Ok(Glob { regex, base_name })
    }

    /// Whether `path` (an absolute workspace path) matches.
    pub fn matches(&self, path: &str) -> bool {
        let subject = if self.base_name { path.rsplit('/').next().unwrap_or(path) } else { path };
        self.regex.is_match(subject)
    }
}

fn glob_error(problem: impl std::fmt::Display) -> SearchError {
    SearchError { message: format!("filePattern {problem}") }
}

/// Turns a glob into regex source, one character at a time.
struct Translator {
    chars: Vec<char>,
    pos: usize,
    /// The last character emitted was `/` or nothing was: `**` here is a whole segment.
    at_segment_start: bool,
}

impl Translator {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    /// Translates up to the end of the glob, or, inside braces (`depth > 0`), up to the `,`
    /// or `}` that ends the current alternative (left for the caller).
    fn sequence(&mut self, out: &mut String, depth: usize) -> Result<(), SearchError> {
        while let Some(c) = self.peek() {
            if depth > 0 && (c == ',' || c == '}') {
                return Ok(());
            }
            self.pos += 1;
            let segment_start = self.at_segment_start;
            self.at_segment_start = false;
            match c {
                '*' => self.star(out, segment_start),
                '?' => out.push_str("[^/]"),
                '[' => self.class(out)?,
                '{' => self.braces(out, depth, segment_start)?,
                '\\' => {
                    let escaped = self.peek().ok_or_else(|| {
                        glob_error("ends with a lone `\\`; write `\\\\` for a backslash or remove it")
                    })?;
                    self.pos += 1;
                    out.push_str(&regex::escape(escaped.encode_utf8(&mut [0; 4])));
                }
                '/' => {
                    out.push('/');
                    self.at_segment_start = true;
                }
                _ => out.push_str(&regex::escape(c.encode_utf8(&mut [0; 4]))),
            }
        }
        Ok(())
    }

    /// `*`, or `**` (the first `*` already taken).
    fn star(&mut self, out: &mut String, segment_start: bool) {
        if self.peek() != Some('*') {
            out.push_str("[^/]*");
            return;
        }
        while self.peek() == Some('*') {
            self.pos += 1;
        }
        match self.peek() {
            Some('/') if segment_start => {
                self.pos += 1;
                out.push_str("(?:[^/]*/)*");
                self.at_segment_start = true;
            }
            None | Some(',' | '}') if segment_start => out.push_str(".*"),
            _ => out.push_str("[^/]*"),
        }
    }

    /// `[...]` (the `[` already taken): one character of the set, never `/`.
    fn class(&mut self, out: &mut String) -> Result<(), SearchError> {
        let open = self.pos - 1;
        let unclosed = || {
            glob_error(format!(
                "has a `[` at character {} that is never closed; close it with `]` or write `\\[` for a literal `[`",
                open + 1
            ))
        };
        let negated = matches!(self.peek(), Some('!' | '^'));
        if negated {
            self.pos += 1;
        }
        let mut set = String::new();
        let mut first = true;
        loop {
            let c = self.peek().ok_or_else(unclosed)?;
            self.pos += 1;
            if c == ']' && !first {
                break;
            }
            first = false;
            let low = if c == '\\' { self.next_char().ok_or_else(unclosed)? } else { c };
            set.push_str(&regex::escape(low.encode_utf8(&mut [0; 4])));
            if self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|&next| next != ']') {
                self.pos += 1;
                let high = self.next_char().ok_or_else(unclosed)?;
                let high = if high == '\\' { self.next_char().ok_or_else(unclosed)? } else { high };
                if high < low {
                    return Err(glob_error(format!(
                        "has the range `{low}-{high}`, whose start is after its end; write `{high}-{low}`"
                    )));
                }
                set.push('-');
                set.push_str(&regex::escape(high.encode_utf8(&mut [0; 4])));
            }
        }
        // The intersection keeps `/` out of negated sets and sets that name it alike.
        out.push_str(&format!("[[{}{set}]&&[^/]]", if negated { "^" } else { "" }));
        Ok(())
    }

    /// `{a,b,...}` (the `{` already taken): a non-capturing group of alternatives.
    fn braces(&mut self, out: &mut String, depth: usize, segment_start: bool) -> Result<(), SearchError> {
        let open = self.pos;
        if depth + 1 > MAX_BRACE_DEPTH {
            return Err(glob_error(format!("nests `{{` more than {MAX_BRACE_DEPTH} deep; flatten the alternatives")));
        }
        out.push_str("(?:");
        loop {
            self.at_segment_start = segment_start;
            self.sequence(out, depth + 1)?;
            match self.next_char() {
                Some(',') => out.push('|'),
                Some('}') => break,
                _ => {
                    return Err(glob_error(format!(
                        "has a `{{` at character {open} that is never closed; close it with `}}` or write `\\{{` for a literal `{{`"
                    )))
                }
            }
        }
        out.push(')');
        self.at_segment_start = false;
        Ok(())
    }

    fn next_char(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }
}
