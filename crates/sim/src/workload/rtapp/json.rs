//! A small, lenient JSON reader for rt-app files.
//!
//! Why not serde_json: rt-app's input is "JSON as workgen accepts it", not JSON. Its examples
//! repeat keys whose *order* is the program (`"run"`, `"sleep"`, `"run"` in one object),
//! contain C-style `/* */` comments and trailing commas, and write `"suspend",` — a key with
//! no value that workgen fills in with the thread's name. serde_json (and every map-based JSON
//! library) keeps one value per key and loses the order, so this reader yields objects as
//! ordered `(key, value)` lists, each with its `line:column`, and accepts those extensions.
//! Everything else is strict JSON: an unexpected character is an error naming its position.

use std::fmt;

/// A position in the source text, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// A value and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub pos: Pos,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Array(Vec<Node>),
    /// Members in source order; keys may repeat.
    Object(Vec<Member>),
    /// A key written without `: value` (workgen's `"suspend",`).
    Absent,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub key: String,
    pub key_pos: Pos,
    pub value: Node,
}

impl Value {
    /// Short name of the value's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
            Value::Absent => "no value",
        }
    }
}

/// A syntax error and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    pub pos: Pos,
    pub message: String,
}

/// Parse a whole document: one value, then only whitespace and comments.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let mut p = Parser {
        chars: text.chars().collect(),
        at: 0,
        line: 1,
        col: 1,
    };
    let node = p.value()?;
    p.skip_blank()?;
    if p.peek().is_some() {
        return Err(p.error("unexpected text after the end of the document"));
    }
    Ok(node)
}

struct Parser {
    chars: Vec<char>,
    at: usize,
    line: usize,
    col: usize,
}

impl Parser {
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
        }
    }

    fn error(&self, message: impl Into<String>) -> SyntaxError {
        SyntaxError {
            pos: self.pos(),
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    /// Skip whitespace, `/* */` and `//` comments.
    fn skip_blank(&mut self) -> Result<(), SyntaxError> {
        loop {
            match (self.peek(), self.chars.get(self.at + 1).copied()) {
                (Some(c), _) if c.is_whitespace() => {
                    self.bump();
                }
                (Some('/'), Some('*')) => {
                    let start = self.pos();
                    self.bump();
                    self.bump();
                    loop {
                        match self.bump() {
                            Some('*') if self.peek() == Some('/') => {
                                self.bump();
                                break;
                            }
                            Some(_) => {}
                            None => {
                                return Err(SyntaxError {
                                    pos: start,
                                    message: "comment `/*` is never closed".into(),
                                })
                            }
                        }
                    }
                }
                (Some('/'), Some('/')) => {
                    while !matches!(self.peek(), None | Some('\n')) {
                        self.bump();
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn expect(&mut self, want: char) -> Result<(), SyntaxError> {
        match self.peek() {
            Some(c) if c == want => {
                self.bump();
                Ok(())
            }
            Some(c) => Err(self.error(format!("expected `{want}`, found `{c}`"))),
            None => Err(self.error(format!("expected `{want}`, found the end of the file"))),
        }
    }

    fn value(&mut self) -> Result<Node, SyntaxError> {
        self.skip_blank()?;
        let pos = self.pos();
        let value = match self.peek() {
            Some('{') => self.object()?,
            Some('[') => self.array()?,
            Some('"') => Value::Str(self.string()?),
            Some(c) if c == '-' || c.is_ascii_digit() => self.number()?,
            Some(c) if c.is_ascii_alphabetic() => self.word()?,
            Some(c) => return Err(self.error(format!("expected a value, found `{c}`"))),
            None => return Err(self.error("expected a value, found the end of the file")),
        };
        Ok(Node { pos, value })
    }

    fn object(&mut self) -> Result<Value, SyntaxError> {
        self.expect('{')?;
        let mut members = Vec::new();
        loop {
            self.skip_blank()?;
            match self.peek() {
                Some('}') => {
                    self.bump();
                    return Ok(Value::Object(members));
                }
                Some('"') => {}
                _ => return Err(self.error("expected a quoted key or `}`")),
            }
            let key_pos = self.pos();
            let key = self.string()?;
            self.skip_blank()?;
            let value = match self.peek() {
                Some(':') => {
                    self.bump();
                    self.value()?
                }
                // workgen's bare key: `"suspend",` or `"suspend" }`.
                Some(',') | Some('}') => Node {
                    pos: key_pos,
                    value: Value::Absent,
                },
                _ => return Err(self.error(format!("expected `:` after key \"{key}\""))),
            };
            members.push(Member {
                key,
                key_pos,
                value,
            });
            self.skip_blank()?;
            match self.peek() {
                Some(',') => {
                    self.bump();
                }
                Some('}') => {}
                _ => return Err(self.error("expected `,` or `}` after an object member")),
            }
        }
    }

    fn array(&mut self) -> Result<Value, SyntaxError> {
        self.expect('[')?;
        let mut items = Vec::new();
        loop {
            self.skip_blank()?;
            if self.peek() == Some(']') {
                self.bump();
                return Ok(Value::Array(items));
            }
            items.push(self.value()?);
            self.skip_blank()?;
            match self.peek() {
                Some(',') => {
                    self.bump();
                }
                Some(']') => {}
                _ => return Err(self.error("expected `,` or `]` after an array item")),
            }
        }
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        let start = self.pos();
        self.expect('"')?;
        let mut out = String::new();
        loop {
            match self.bump() {
                Some('"') => return Ok(out),
                Some('\\') => {
                    let c = match self.bump() {
                        Some('n') => '\n',
                        Some('t') => '\t',
                        Some('r') => '\r',
                        Some('b') => '\u{8}',
                        Some('f') => '\u{c}',
                        Some('u') => self.unicode_escape()?,
                        Some(c @ ('"' | '\\' | '/')) => c,
                        _ => return Err(self.error("invalid escape in string")),
                    };
                    out.push(c);
                }
                Some('\n') | None => {
                    return Err(SyntaxError {
                        pos: start,
                        message: "string is never closed".into(),
                    })
                }
                Some(c) => out.push(c),
            }
        }
    }

    fn unicode_escape(&mut self) -> Result<char, SyntaxError> {
        let mut code = 0u32;
        for _ in 0..4 {
            let digit = self
                .bump()
                .and_then(|c| c.to_digit(16))
                .ok_or_else(|| self.error("`\\u` needs four hex digits"))?;
            code = code * 16 + digit;
        }
        char::from_u32(code).ok_or_else(|| self.error("`\\u` escape is not a character"))
    }

    fn number(&mut self) -> Result<Value, SyntaxError> {
        let start = self.pos();
        let mut text = String::new();
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E') {
                text.push(c);
                self.bump();
            } else {
                break;
            }
        }
        let bad = || SyntaxError {
            pos: start,
            message: format!("`{text}` is not a number"),
        };
        if text.contains(['.', 'e', 'E']) {
            text.parse().map(Value::Float).map_err(|_| bad())
        } else {
            text.parse().map(Value::Int).map_err(|_| bad())
        }
    }

    fn word(&mut self) -> Result<Value, SyntaxError> {
        let start = self.pos();
        let mut word = String::new();
        while let Some(c) = self.peek().filter(|c| c.is_ascii_alphanumeric()) {
            word.push(c);
            self.bump();
        }
        match word.as_str() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            "null" => Ok(Value::Null),
            _ => Err(SyntaxError {
                pos: start,
                message: format!("`{word}` is not a value (strings need double quotes)"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(node: &Node) -> Vec<&str> {
        match &node.value {
            Value::Object(m) => m.iter().map(|m| m.key.as_str()).collect(),
            other => panic!("not an object: {other:?}"),
        }
    }

    #[test]
    fn keeps_repeated_keys_in_order() {
        let doc = parse(r#"{"run": 1, "sleep": 2, "run": 3}"#).unwrap();
        assert_eq!(keys(&doc), ["run", "sleep", "run"]);
    }

    #[test]
    fn accepts_comments_trailing_commas_and_bare_keys() {
        let doc = parse("{ /* c\n */ \"a\": [1, 2,], // x\n \"suspend\", \"b\": {\"c\": true,}, }")
            .unwrap();
        assert_eq!(keys(&doc), ["a", "suspend", "b"]);
        let Value::Object(m) = &doc.value else {
            unreachable!()
        };
        assert_eq!(m[1].value.value, Value::Absent);
        assert_eq!(m[2].key_pos, Pos { line: 3, col: 13 });
    }

    #[test]
    fn numbers_strings_and_escapes() {
        let doc = parse(r#"[-1, 2.5, "a\"b\u0041", null, false]"#).unwrap();
        let Value::Array(items) = doc.value else {
            unreachable!()
        };
        let values: Vec<Value> = items.into_iter().map(|n| n.value).collect();
        assert_eq!(
            values,
            [
                Value::Int(-1),
                Value::Float(2.5),
                Value::Str("a\"bA".into()),
                Value::Null,
                Value::Bool(false)
            ]
        );
    }

    #[test]
    fn errors_carry_positions() {
        let err = parse("{\n  \"a\": 1\n  \"b\": 2 }").unwrap_err();
        assert_eq!(err.pos, Pos { line: 3, col: 3 });
        assert!(err.message.contains("`,` or `}`"), "{}", err.message);
        let err = parse("{\"a\": /* open").unwrap_err();
        assert!(err.message.contains("never closed"));
        let err = parse("{\"a\": yes}").unwrap_err();
        assert!(err.message.contains("`yes` is not a value"));
        assert!(parse("{} x").is_err());
    }
}
