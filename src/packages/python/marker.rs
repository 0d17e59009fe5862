//! PEP 508 environment markers (`sys_platform == "emscripten" and python_version >= "3.10"`,
//! `extra == "socks"`), parsed and evaluated for one runtime as `packaging` evaluates them.
//!
//! <https://packaging.python.org/en/latest/specifications/dependency-specifiers/#environment-markers>

use super::name::canonical_name;
use super::version::{Operator, Specifier, Version};
use std::collections::BTreeMap;

/// Most nested parentheses read; deeper markers are refused (they are never real).
const MAX_NESTING: usize = 32;

/// The marker variables, and the legacy dotted names older metadata still uses.
const VARIABLES: [&str; 12] = [
    "implementation_name",
    "implementation_version",
    "os_name",
    "platform_machine",
    "platform_python_implementation",
    "platform_release",
    "platform_system",
    "platform_version",
    "python_full_version",
    "python_version",
    "sys_platform",
    "extra",
];
const ALIASES: [(&str, &str); 6] = [
    ("os.name", "os_name"),
    ("sys.platform", "sys_platform"),
    ("platform.version", "platform_version"),
    ("platform.machine", "platform_machine"),
    ("platform.python_implementation", "platform_python_implementation"),
    ("python_implementation", "platform_python_implementation"),
];

/// What the markers are evaluated against: each variable's value (`extra` aside).
pub type Environment = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq)]
pub enum Marker {
    And(Vec<Marker>),
    Or(Vec<Marker>),
    Compare { left: Value, op: MarkerOp, right: Value },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Variable(String),
    Literal(String),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MarkerOp {
    Version(Operator),
    In,
    NotIn,
}

impl Marker {
    pub fn parse(text: &str) -> Result<Marker, String> {
        let mut parser = Parser { text, at: 0, depth: 0 };
        let marker = parser.or()?;
        parser.skip_space();
        if parser.at < text.len() {
            return Err(format!("marker {text:?}: unexpected {:?}", &text[parser.at..]));
        }
        Ok(marker)
    }

    /// The marker's value in `env` with `extra` set to `extra` ("" for none), as packaging's
    /// `Marker.evaluate`.
    pub fn evaluate(&self, env: &Environment, extra: &str) -> bool {
        match self {
            Marker::And(parts) => parts.iter().all(|m| m.evaluate(env, extra)),
            Marker::Or(parts) => parts.iter().any(|m| m.evaluate(env, extra)),
            Marker::Compare { left, op, right } => {
                let is_extra = [left, right].iter().any(|v| matches!(v, Value::Variable(name) if name == "extra"));
                let value = |v: &Value| match v {
                    Value::Variable(name) if name == "extra" => extra.to_owned(),
                    Value::Variable(name) => env.get(name).cloned().unwrap_or_default(),
                    Value::Literal(text) => text.clone(),
                };
                let (mut l, mut r) = (value(left), value(right));
                if is_extra {
                    // Extra names compare normalized (PEP 685).
                    (l, r) = (canonical_name(&l), canonical_name(&r));
                }
                compare(&l, *op, &r)
            }
        }
    }

    /// Whether the marker mentions `extra` at all.
    pub fn mentions_extra(&self) -> bool {
        match self {
            Marker::And(parts) | Marker::Or(parts) => parts.iter().any(Marker::mentions_extra),
            Marker::Compare { left, right, .. } => {
                [left, right].iter().any(|v| matches!(v, Value::Variable(name) if name == "extra"))
            }
        }
    }
}

/// packaging's `_eval_op`: a version comparison when the right side and the operator make a
/// specifier and the left side a version, else a comparison of the strings.
fn compare(left: &str, op: MarkerOp, right: &str) -> bool {
    match op {
        MarkerOp::In => right.contains(left),
        MarkerOp::NotIn => !right.contains(left),
        MarkerOp::Version(operator) => {
            let spec = Specifier::parse(&format!("{}{right}", operator.as_str()));
            match (spec, Version::parse(left)) {
                (Ok(spec), Ok(version)) => spec.contains(&version),
                _ => match operator {
                    Operator::Equal | Operator::Arbitrary => left == right,
                    Operator::NotEqual => left != right,
                    Operator::Less => left < right,
                    Operator::LessEqual => left <= right,
                    Operator::Greater => left > right,
                    Operator::GreaterEqual => left >= right,
                    Operator::Compatible => false,
                },
            }
        }
    }
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn skip_space(&mut self) {
        self.at += self.rest().len() - self.rest().trim_start().len();
    }

    /// Eats `word` when it stands alone here (not the start of a longer name).
    fn keyword(&mut self, word: &str) -> bool {
        self.skip_space();
        let rest = self.rest();
        let alone =
            rest.starts_with(word) && !rest[word.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        if alone {
            self.at += word.len();
        }
        alone
    }

    fn or(&mut self) -> Result<Marker, String> {
        let mut parts = vec![self.and()?];
        while self.keyword("or") {
            parts.push(self.and()?);
        }
        Ok(if parts.len() == 1 { parts.remove(0) } else { Marker::Or(parts) })
    }

    fn and(&mut self) -> Result<Marker, String> {
        let mut parts = vec![self.atom()?];
        while self.keyword("and") {
            parts.push(self.atom()?);
        }
        Ok(if parts.len() == 1 { parts.remove(0) } else { Marker::And(parts) })
    }

    fn atom(&mut self) -> Result<Marker, String> {
        self.skip_space();
        if self.rest().starts_with('(') {
            self.depth += 1;
            if self.depth > MAX_NESTING {
                return Err(format!("marker {:?}: nested deeper than {MAX_NESTING}", self.text));
            }
            self.at += 1;
            let inner = self.or()?;
            self.skip_space();
            if !self.rest().starts_with(')') {
                return Err(format!("marker {:?}: a \"(\" is not closed", self.text));
            }
            self.at += 1;
            self.depth -= 1;
            return Ok(inner);
        }
        let left = self.value()?;
        let op = self.op()?;
        let right = self.value()?;
        if matches!((&left, &right), (Value::Literal(_), Value::Literal(_))) {
            return Err(format!("marker {:?}: compares two strings; one side must be a variable", self.text));
        }
        Ok(Marker::Compare { left, op, right })
    }

    fn value(&mut self) -> Result<Value, String> {
        self.skip_space();
        let rest = self.rest();
        if let Some(quote) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') {
            let end = rest[1..].find(quote).ok_or_else(|| format!("marker {:?}: a string is not closed", self.text))?;
            self.at += end + 2;
            return Ok(Value::Literal(rest[1..=end].to_owned()));
        }
        let length = rest.bytes().take_while(|b| b.is_ascii_alphanumeric() || b"_.".contains(b)).count();
        let word = &rest[..length];
        let name = ALIASES.iter().find(|(alias, _)| *alias == word).map_or(word, |(_, name)| name);
        if !VARIABLES.contains(&name) {
            return Err(format!("marker {:?}: {word:?} is not a marker variable (e.g. python_version, sys_platform, extra) or a quoted string", self.text));
        }
        self.at += length;
        Ok(Value::Variable(name.to_owned()))
    }

    fn op(&mut self) -> Result<MarkerOp, String> {
        self.skip_space();
        if self.keyword("in") {
            return Ok(MarkerOp::In);
        }
        if self.keyword("not") {
            return if self.keyword("in") {
                Ok(MarkerOp::NotIn)
            } else {
                Err(format!("marker {:?}: \"not\" must be followed by \"in\"", self.text))
            };
        }
        let (op, rest) = Operator::split(self.rest()).ok_or_else(|| {
            format!(
                "marker {:?}: expected a comparison (==, !=, <, <=, >, >=, ~=, ===, in, not in) at {:?}",
                self.text,
                self.rest()
            )
        })?;
        self.at = self.text.len() - rest.len();
        Ok(MarkerOp::Version(op))
    }
}
