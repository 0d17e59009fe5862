//! The module specifiers a `run_js` call's code imports by string literal (`import x from
//! "lodash/chunk"`, `export * from "a/b"`, `import "c/d"`, `import("date-fns/format")`), found
//! by a tokenizer that knows JavaScript's comments, strings, template literals and regular
//! expressions, so text inside them is never taken for an import. The subpaths of listed
//! packages among them are bundled beside the packages themselves.

use std::collections::BTreeSet;

/// Most subpaths one call's code may import.
pub const MAX_SUBPATHS: usize = 50;
/// The longest subpath bundled.
const MAX_SUBPATH_LEN: usize = 200;

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Str(String),
    Punct(char),
    /// A number, regular expression or template literal: a value, never an import.
    Value,
}

/// The subpath imports of `dependencies` in `code` (`lodash/chunk` for a listed `lodash`),
/// sorted; a specifier that names no listed package, or whose subpath is not a plain relative
/// path, is left for the runner to refuse.
pub fn subpath_imports<'a>(code: &str, dependencies: impl IntoIterator<Item = &'a String> + Clone) -> BTreeSet<String> {
    module_specifiers(code)
        .into_iter()
        .filter(|specifier| {
            dependencies.clone().into_iter().any(|name| {
                specifier.strip_prefix(name.as_str()).and_then(|rest| rest.strip_prefix('/')).is_some_and(plain_subpath)
            })
        })
        .collect()
}

/// `chunk`, `fp/map`, `locale/en-US.js`: segments of safe characters, none empty, `.` or `..`.
fn plain_subpath(subpath: &str) -> bool {
    subpath.len() <= MAX_SUBPATH_LEN
        && subpath.split('/').all(|segment| {
            !segment.is_empty()
                && segment != "."
                && segment != ".."
                && segment.bytes().all(|b| b.is_ascii_alphanumeric() || b"._~@+-".contains(&b))
        })
}

/// Every string literal that follows `from`, `import` or `import(` as a token.
pub fn module_specifiers(code: &str) -> Vec<String> {
    let tokens = tokenize(code);
    let mut found = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let word = |w: &str| matches!(token, Token::Word(t) if t == w);
        let after_dot = i > 0 && tokens[i - 1] == Token::Punct('.');
        let next = tokens.get(i + 1);
        let specifier = match next {
            Some(Token::Str(text)) if (word("from") || word("import")) && !after_dot => Some(text),
            Some(Token::Punct('(')) if word("import") && !after_dot => match tokens.get(i + 2) {
                Some(Token::Str(text)) if tokens.get(i + 3) == Some(&Token::Punct(')')) => Some(text),
                _ => None,
            },
            _ => None,
        };
        found.extend(specifier.cloned());
    }
    found
}

/// Words after which a `/` starts a regular expression rather than a division.
const BEFORE_REGEX: [&str; 14] = [
    "return",
    "typeof",
    "instanceof",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "case",
    "do",
    "else",
    "yield",
    "await",
];

fn tokenize(code: &str) -> Vec<Token> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    // Brace depth, and the depths at which open template substitutions (`${`) began.
    let mut depth = 0usize;
    let mut templates: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            _ if c.is_whitespace() => i += 1,
            '/' if next == Some('/') => i = skip_until(&chars, i, "\n"),
            '/' if next == Some('*') => i = skip_until(&chars, i + 2, "*/"),
            '\'' | '"' => {
                let (text, end) = string(&chars, i);
                tokens.push(Token::Str(text));
                i = end;
            }
            '`' => {
                i = template(&chars, i + 1, &mut templates, depth);
                tokens.push(Token::Value);
            }
            '/' if regex_may_start(tokens.last()) => {
                i = regex(&chars, i);
                tokens.push(Token::Value);
            }
            '{' => {
                depth += 1;
                tokens.push(Token::Punct(c));
                i += 1;
            }
            '}' if templates.last() == Some(&depth) => {
                templates.pop();
                i = template(&chars, i + 1, &mut templates, depth);
                tokens.push(Token::Value);
            }
            '}' => {
                depth = depth.saturating_sub(1);
                tokens.push(Token::Punct(c));
                i += 1;
            }
            _ if c.is_ascii_digit() => {
                i += chars[i..].iter().take_while(|c| c.is_alphanumeric() || matches!(c, '.' | '_')).count();
                tokens.push(Token::Value);
            }
            _ if c.is_alphabetic() || c == '_' || c == '$' => {
                let length = chars[i..].iter().take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '$')).count();
                tokens.push(Token::Word(chars[i..i + length].iter().collect()));
                i += length;
            }
            _ => {
                tokens.push(Token::Punct(c));
                i += 1;
            }
        }
    }
    tokens
}

/// The index just past `end` (or the end of the code), searching from `from`.
fn skip_until(chars: &[char], from: usize, end: &str) -> usize {
    let end: Vec<char> = end.chars().collect();
    (from..chars.len()).find(|&i| chars[i..].starts_with(&end)).map_or(chars.len(), |i| i + end.len())
}

/// A quoted string from `start` (its quote): its value and the index after it. An unclosed
/// string ends at the line's end, as a JavaScript parser would give up there.
fn string(chars: &[char], start: usize) -> (String, usize) {
    let quote = chars[start];
    let mut text = String::new();
    let mut i = start + 1;
    while i < chars.len() && chars[i] != quote && chars[i] != '\n' {
        if chars[i] == '\\' && i + 1 < chars.len() {
            text.push(chars[i + 1]);
            i += 2;
        } else {
            text.push(chars[i]);
            i += 1;
        }
    }
    (text, i + 1)
}

/// Reads template literal text from `i` to its closing backtick (the index after it), or to a
/// `${`, whose depth is pushed onto `templates` (its `}` resumes the text).
fn template(chars: &[char], mut i: usize, templates: &mut Vec<usize>, depth: usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '`' => return i + 1,
            '$' if chars.get(i + 1) == Some(&'{') => {
                templates.push(depth);
                return i + 2;
            }
            _ => i += 1,
        }
    }
    chars.len()
}

fn regex_may_start(previous: Option<&Token>) -> bool {
    match previous {
        None => true,
        Some(Token::Punct(c)) => !matches!(c, ')' | ']' | '}'),
        Some(Token::Word(word)) => BEFORE_REGEX.contains(&word.as_str()),
        Some(Token::Str(_) | Token::Value) => false,
    }
}

/// A regular expression literal from its `/`: the index after its flags.
fn regex(chars: &[char], start: usize) -> usize {
    let mut i = start + 1;
    let mut in_class = false;
    while i < chars.len() && chars[i] != '\n' {
        match chars[i] {
            '\\' => i += 1,
            '[' => in_class = true,
            ']' => in_class = false,
            '/' if !in_class => {
                return i + 1 + chars[i + 1..].iter().take_while(|c| c.is_alphanumeric()).count();
            }
            _ => {}
        }
        i += 1;
    }
    i
}
