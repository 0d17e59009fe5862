//! The `search` tool's engine: grep-style matching of a regular expression against the lines
//! of a relay session's workspace files. Pure: the caller (the relay session) hands in the
//! files as `(path, bytes)` and gets JSON-ready results back.
//!
//! - **Linear time.** Patterns are compiled by the `regex` crate, which has no backtracking:
//!   finding a match takes time linear in the line's length for a given pattern, so no pattern
//!   (`(a+)+$` included) can make a search run away. The price is that backreferences
//!   (`\1`) and look-around (`(?=`, `(?!`, `(?<=`, `(?<!`) do not exist, and asking for them
//!   is an error that says so. The compiled pattern's size is capped too
//!   ([`REGEX_SIZE_LIMIT`]), so huge repetition counts (`a{100000}`) are refused, not built.
//! - **Syntax** is that of `grep -E` / ripgrep (Rust `regex` syntax): `|`, `+`, `?`, `{m,n}`,
//!   `()` are operators, POSIX classes (`[[:alpha:]]`) work, `\w`, `\d`, `\s`, `\b` are
//!   Unicode-aware; `\p{..}` Unicode properties are not compiled in.
//! - **Lines.** Like `grep -n`, each line matches at most once and is reported once: `line` is
//!   1-based, `column` is the 1-based position, in characters, of the line's first match.
//!   Lines end at `\n`; a `\r` before it is not part of the line (so `$` works on CRLF files),
//!   and a leading UTF-8 byte order mark is not part of line 1. A match never spans lines.
//! - **Text.** `text` is the line itself when it has at most [`MAX_TEXT_CHARS`] characters;
//!   a longer line is cut to a window of [`MAX_TEXT_CHARS`] characters that starts
//!   [`TEXT_CONTEXT_CHARS`] characters before the match (or at the line's start), with `…`
//!   added at each end that was cut.
//! - **Scope.** A file is searched when it lies within one of `paths` (segment-wise: `/tmp`
//!   holds `/tmp/x`, not `/tmpx`) and matches `filePattern` (see [`glob`]). Files go in path
//!   order (by bytes), so results are deterministic. Binary files (a NUL byte in the first
//!   [`BINARY_PROBE_BYTES`], or not UTF-8) are skipped and counted in `filesSkipped`.
//! - **Counts.** `matches` lists at most `maxResults` lines; `totalMatches` counts every
//!   matching line in scope, and `truncated` says some were left out of `matches`.

pub mod glob;

use crate::policy::fs_path::{clean_path, is_within};
use crate::policy::WORKSPACE_ROOTS;
use glob::Glob;
use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};

/// `maxResults` when the request has none.
pub const DEFAULT_MAX_RESULTS: u32 = 100;
/// The largest `maxResults` taken.
pub const MAX_RESULTS_LIMIT: u32 = 1000;
/// The longest pattern taken, in characters.
pub const MAX_PATTERN_CHARS: usize = 1000;
/// The most characters of a line a match's `text` carries (not counting `…`).
pub const MAX_TEXT_CHARS: usize = 500;
/// How many characters before the match a cut `text` keeps.
pub const TEXT_CONTEXT_CHARS: usize = 100;
/// How far into a file a NUL byte marks it as binary.
pub const BINARY_PROBE_BYTES: usize = 8 * 1024;
/// What a compiled pattern may take. Enough for `\w{50}` (Unicode `\w` is large); the
/// refusal suggests smaller counts or ASCII classes.
pub const REGEX_SIZE_LIMIT: usize = 4 << 20;
/// The lazy DFA's cache, which the regex crate refills (or falls back from) when full: it
/// bounds memory, never correctness.
const DFA_SIZE_LIMIT: usize = 2 << 20;

/// A `search` call's arguments, as the tool's input schema has them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchRequest {
    pub pattern: String,
    /// Directories (or files) to search; `None` or empty: [`WORKSPACE_ROOTS`].
    #[serde(default)]
    pub paths: Option<Vec<String>>,
    #[serde(default)]
    pub file_pattern: Option<String>,
    /// Default `true`.
    #[serde(default)]
    pub case_sensitive: Option<bool>,
    /// Default [`DEFAULT_MAX_RESULTS`], at most [`MAX_RESULTS_LIMIT`].
    #[serde(default)]
    pub max_results: Option<u32>,
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Match {
    pub path: String,
    /// 1-based.
    pub line: u64,
    /// 1-based, in characters, where the line's first match starts.
    pub column: u64,
    /// The line (without its line ending), cut as the module docs say.
    pub text: String,
}

/// A search's answer, the tool's `structuredContent`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResult {
    pub matches: Vec<Match>,
    /// Every matching line in scope, listed or not.
    pub total_matches: u64,
    /// Some matching lines are not in `matches`.
    pub truncated: bool,
    /// Text files in scope that were searched.
    pub files_searched: u64,
    /// Files in scope left out as binary.
    pub files_skipped: u64,
}

/// Why a search could not run; `message` names the argument and what to change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchError {
    pub message: String,
}

impl std::fmt::Display for SearchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SearchError {}

/// Searches `files` (`(path, bytes)`, in any order) as `request` says. Every argument is
/// checked before any file is looked at, so `search(request, [])` validates a request.
pub fn search<'a>(
    request: &SearchRequest,
    files: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<SearchResult, SearchError> {
    let mut searcher = Searcher::new(request)?;
    let mut in_scope: Vec<(&str, &[u8])> = files.into_iter().filter(|(path, _)| searcher.covers(path)).collect();
    in_scope.sort_by(|a, b| a.0.cmp(b.0));
    for (path, bytes) in in_scope {
        searcher.scan(path, bytes);
    }
    Ok(searcher.finish())
}

/// A search fed one file at a time, for a caller that reads each body as it goes (the relay
/// session): ask [`Searcher::covers`] before reading a file, then [`Searcher::scan`] the files
/// in path order (by bytes), then [`Searcher::finish`].
pub struct Searcher {
    plan: Plan,
    result: SearchResult,
}

impl Searcher {
    /// The request checked (every argument), or why it cannot run.
    pub fn new(request: &SearchRequest) -> Result<Searcher, SearchError> {
        Ok(Searcher { plan: Plan::new(request)?, result: SearchResult::default() })
    }

    /// Whether the file at `path` is in the search's scope.
    pub fn covers(&self, path: &str) -> bool {
        self.plan.covers(path)
    }

    /// Searches one file in scope (a binary one is counted as skipped).
    pub fn scan(&mut self, path: &str, bytes: &[u8]) {
        match text_of(bytes) {
            Some(text) => {
                self.result.files_searched += 1;
                self.plan.scan(path, text, &mut self.result);
            }
            None => self.result.files_skipped += 1,
        }
    }

    /// The answer, from the files scanned.
    pub fn finish(mut self) -> SearchResult {
        self.result.truncated = self.result.total_matches > self.result.matches.len() as u64;
        self.result
    }
}

/// A checked request: what to match, where, and how many to list.
struct Plan {
    regex: Regex,
    roots: Vec<String>,
    glob: Option<Glob>,
    max_results: usize,
}

impl Plan {
    fn new(request: &SearchRequest) -> Result<Plan, SearchError> {
        Ok(Plan {
            regex: compile_pattern(&request.pattern, request.case_sensitive.unwrap_or(true))?,
            roots: roots(request.paths.as_deref())?,
            glob: request.file_pattern.as_deref().map(Glob::new).transpose()?,
            max_results: max_results(request.max_results)? as usize,
        })
    }

    /// Whether the file at `path` is in the search's scope.
    fn covers(&self, path: &str) -> bool {
        self.roots.iter().any(|root| is_within(path, root)) && self.glob.as_ref().is_none_or(|glob| glob.matches(path))
    }

    /// Adds `text`'s matching lines to `result`: located and listed while there is room,
    /// only counted after that.
    fn scan(&self, path: &str, text: &str, result: &mut SearchResult) {
        for (index, line) in text.lines().enumerate() {
            if result.matches.len() < self.max_results {
                if let Some(found) = self.regex.find(line) {
                    result.total_matches += 1;
                    result.matches.push(line_match(path, index, line, found.start()));
                }
            } else if self.regex.is_match(line) {
                result.total_matches += 1;
            }
        }
    }
}

/// The match on the `index`th line (0-based) `line`, whose first match starts at byte `start`.
fn line_match(path: &str, index: usize, line: &str, start: usize) -> Match {
    let column = line[..start].chars().count();
    Match { path: path.to_string(), line: index as u64 + 1, column: column as u64 + 1, text: excerpt(line, column) }
}

/// `line` cut to [`MAX_TEXT_CHARS`] around the character at `column` (0-based).
fn excerpt(line: &str, column: usize) -> String {
    let length = line.chars().count();
    if length <= MAX_TEXT_CHARS {
        return line.to_string();
    }
    let start = column.saturating_sub(TEXT_CONTEXT_CHARS).min(length - MAX_TEXT_CHARS);
    let end = start + MAX_TEXT_CHARS;
    let mut text = String::with_capacity(MAX_TEXT_CHARS + 2);
    if start > 0 {
        text.push('…');
    }
    text.extend(line.chars().skip(start).take(MAX_TEXT_CHARS));
    if end < length {
        text.push('…');
    }
    text
}

/// The file's text, or `None` when it is binary: a NUL in its first [`BINARY_PROBE_BYTES`],
/// or not UTF-8. A leading byte order mark is dropped.
fn text_of(bytes: &[u8]) -> Option<&str> {
    if bytes[..bytes.len().min(BINARY_PROBE_BYTES)].contains(&0) {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    Some(text.strip_prefix('\u{feff}').unwrap_or(text))
}

/// `paths` checked and without trailing `/`; none (or an empty list) is the whole workspace.
fn roots(paths: Option<&[String]>) -> Result<Vec<String>, SearchError> {
    match paths {
        None | Some([]) => Ok(WORKSPACE_ROOTS.iter().map(|root| root.to_string()).collect()),
        Some(paths) => paths
            .iter()
            .map(|path| {
                clean_path(path).map(str::to_string).ok_or_else(|| SearchError {
                    message: format!(
                        "paths: {path:?} is not an absolute path without empty, `.` or `..` segments; \
                         name a workspace directory such as \"/host\" or \"/tmp/data\""
                    ),
                })
            })
            .collect(),
    }
}

fn max_results(requested: Option<u32>) -> Result<u32, SearchError> {
    match requested.unwrap_or(DEFAULT_MAX_RESULTS) {
        n @ 1..=MAX_RESULTS_LIMIT => Ok(n),
        n => Err(SearchError {
            message: format!(
                "maxResults: {n} is out of range; ask for 1 to {MAX_RESULTS_LIMIT} (totalMatches counts every match anyway)"
            ),
        }),
    }
}

/// The pattern compiled, or an error that names the construct to change.
fn compile_pattern(pattern: &str, case_sensitive: bool) -> Result<Regex, SearchError> {
    let refuse = |problem: String| SearchError { message: format!("pattern: {problem}") };
    if pattern.is_empty() {
        return Err(refuse(
            "is empty; give a regular expression, e.g. \"TODO\" or \"fn \\w+\" (\".\" matches every non-empty line)"
                .into(),
        ));
    }
    if pattern.chars().count() > MAX_PATTERN_CHARS {
        return Err(refuse(format!("is longer than {MAX_PATTERN_CHARS} characters; use a shorter pattern")));
    }
    if pattern.contains('\n') {
        return Err(refuse(
            "has a line break, but lines are matched one at a time, so it could never match; \
             use `|` for alternatives (\"foo|bar\")"
                .into(),
        ));
    }
    RegexBuilder::new(pattern)
        .case_insensitive(!case_sensitive)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(DFA_SIZE_LIMIT)
        .build()
        .map_err(|error| refuse(regex_problem(&error)))
}

/// What is wrong with a pattern the regex crate refused, in one line, with the way out.
fn regex_problem(error: &regex::Error) -> String {
    match error {
        regex::Error::CompiledTooBig(limit) => format!(
            "compiles to more than {} MiB, this search's limit; use smaller repetition counts \
             (e.g. x{{1,100}} rather than x{{1,100000}}), or ASCII classes such as [[:alnum:]_] \
             rather than the much larger Unicode \\w",
            limit >> 20
        ),
        regex::Error::Syntax(report) => {
            let (problem, at) = syntax_problem(report);
            format!("is not a valid regular expression: {problem}{at}{}", remedy(&problem))
        }
        other => format!("is not a valid regular expression: {other}"),
    }
}

/// The regex crate's multi-line syntax report (the pattern, `^^^` under the offending part,
/// then `error: ...`) as the problem and where it is (" at characters 4-5").
fn syntax_problem(report: &str) -> (String, String) {
    let lines: Vec<&str> = report.lines().collect();
    let Some(problem_line) = lines.iter().position(|line| line.starts_with("error: ")) else {
        return (report.trim().to_string(), String::new());
    };
    let problem = lines[problem_line].trim_start_matches("error: ").to_string();
    // The report indents the pattern and its carets by 4; with one pattern line, the carets'
    // columns are character positions in the pattern.
    let carets = problem_line.checked_sub(1).map(|i| lines[i]).filter(|line| line.trim_start().starts_with('^'));
    let at = match carets {
        Some(carets) if problem_line == 3 => {
            let first = carets.chars().take_while(|&c| c == ' ').count().saturating_sub(4) + 1;
            let last = first + carets.trim().chars().count() - 1;
            if first == last {
                format!(" at character {first}")
            } else {
                format!(" at characters {first}-{last}")
            }
        }
        _ => String::new(),
    };
    (problem, at)
}

/// The way out of a syntax problem, when there is a known one.
fn remedy(problem: &str) -> &'static str {
    if problem.contains("backreferences are not supported") {
        "; this search runs in linear time and has no backreferences: spell the repeated text out \
         (e.g. (ab)(ab) rather than (ab)\\1)"
    } else if problem.contains("look-around") {
        "; this search runs in linear time and has no lookahead or lookbehind: match the \
         surrounding text itself, or use \\b for a word boundary"
    } else if problem.contains("Unicode property") {
        "; Unicode properties (\\p{...}) are not available here: use POSIX classes such as \
         [[:alpha:]] or ranges such as [а-яё]"
    } else if problem.contains("decimal literal") {
        "; repetition counts must be small whole numbers, e.g. x{2,5}"
    } else {
        "; write `\\` before a character to match it literally (e.g. \\( or \\.)"
    }
}
