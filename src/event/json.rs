//! The one reading of a record's JSON, shared by the decoder and the
//! fingerprint: a strict RFC 8259 parser that keeps what both need and a
//! deduplicating parser loses. Every member of an object is kept, in order,
//! so a repeated key is seen instead of silently resolved (simd-json's
//! values kept the first of two in small objects and the last in large
//! ones); every number is kept as written, so numbers compare as exact
//! decimals (`2e18` is `2000000000000000000`, `9007199254740993.0` is not
//! `9007199254740992`). Its errors say what is wrong and at which byte.
//! Linear in the input, nesting bounded: no input makes it panic or
//! exhaust the stack.

use std::borrow::Cow;
use std::fmt;

/// Deepest nesting read, as serde_json's default: deeper is refused, so a
/// hostile payload cannot exhaust the stack.
const MAX_DEPTH: usize = 128;

/// Objects of up to this many members are checked for a repeated key pair
/// by pair; larger ones by sorting their keys.
const PAIRWISE_MEMBERS: usize = 16;

/// A JSON value, borrowing its text from the payload where it can.
#[derive(Debug)]
pub(super) enum Value<'a> {
    Null,
    Bool(bool),
    Number(Number<'a>),
    String(Cow<'a, str>),
    Array(Vec<Value<'a>>),
    Object(Object<'a>),
}

impl<'a> Value<'a> {
    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(text) => Some(&**text),
            _ => None,
        }
    }

    pub(super) fn as_object(&self) -> Option<&Object<'a>> {
        match self {
            Value::Object(object) => Some(object),
            _ => None,
        }
    }

    pub(super) fn as_array(&self) -> Option<&[Value<'a>]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    pub(super) fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The integer a number equals exactly (`2`, `2.0`, `2e0`, `0.2e1`),
    /// when it is one that fits in 128 bits.
    pub(super) fn as_integer(&self) -> Option<i128> {
        match self {
            Value::Number(number) => number.integer(),
            _ => None,
        }
    }
}

/// An object's members in the order written, repeated keys included.
#[derive(Debug)]
pub(super) struct Object<'a> {
    members: Vec<(Cow<'a, str>, Value<'a>)>,
    /// Whether a key of this object (not of one inside it) is repeated.
    repeats: bool,
}

impl<'a> Object<'a> {
    fn new(members: Vec<(Cow<'a, str>, Value<'a>)>) -> Self {
        let repeats = has_repeats(&members);
        Object { members, repeats }
    }

    /// The value of the member `name`; none when it is absent, or repeated
    /// (a repeated key has no one value).
    pub(super) fn get(&self, name: &str) -> Option<&Value<'a>> {
        let mut found = self.members.iter().filter(|(key, _)| key == name);
        let (_, value) = found.next()?;
        if self.repeats && found.next().is_some() {
            return None;
        }
        Some(value)
    }

    pub(super) fn contains_key(&self, name: &str) -> bool {
        self.members.iter().any(|(key, _)| key == name)
    }

    pub(super) fn members(&self) -> &[(Cow<'a, str>, Value<'a>)] {
        &self.members
    }

    /// The first repeated key in this object or in any value inside it
    /// (this object's own first), and where: `""` for this object, else a
    /// path such as `data.lines[0]`.
    pub(super) fn first_repeat(&self) -> Option<(String, &str)> {
        if self.repeats {
            let key = self
                .members
                .iter()
                .enumerate()
                .find(|(index, (key, _))| self.members[..*index].iter().any(|(k, _)| k == key))
                .map(|(_, (key, _))| key.as_ref())?;
            return Some((String::new(), key));
        }
        self.members.iter().find_map(|(key, value)| {
            value
                .first_repeat()
                .map(|(path, repeated)| (join(key, &path), repeated))
        })
    }
}

impl Value<'_> {
    fn first_repeat(&self) -> Option<(String, &str)> {
        match self {
            Value::Object(object) => object.first_repeat(),
            Value::Array(items) => items.iter().enumerate().find_map(|(index, item)| {
                item.first_repeat()
                    .map(|(path, repeated)| (join(&format!("[{index}]"), &path), repeated))
            }),
            _ => None,
        }
    }
}

/// `outer` followed by the `inner` path below it.
fn join(outer: &str, inner: &str) -> String {
    match inner.as_bytes().first() {
        None => outer.to_owned(),
        Some(b'[') => format!("{outer}{inner}"),
        Some(_) => format!("{outer}.{inner}"),
    }
}

fn has_repeats(members: &[(Cow<'_, str>, Value<'_>)]) -> bool {
    if members.len() <= PAIRWISE_MEMBERS {
        return members
            .iter()
            .enumerate()
            .any(|(index, (key, _))| members[..index].iter().any(|(k, _)| k == key));
    }
    let mut keys: Vec<&str> = members.iter().map(|(key, _)| key.as_ref()).collect();
    keys.sort_unstable();
    keys.windows(2).any(|pair| pair[0] == pair[1])
}

/// A number as written (valid JSON number syntax), read as an exact
/// decimal value.
#[derive(Debug, Clone, Copy)]
pub(super) struct Number<'a>(&'a str);

/// A number's canonical form: one for each decimal value.
#[derive(Debug, PartialEq)]
pub(super) enum Canonical {
    /// An integer that fits in 128 bits.
    Integer(i128),
    /// Any other number that is exactly the shortest decimal of a double
    /// (`0.1`, `1.5`, `1e300`): those bits, as fingerprints written before
    /// numbers were read exactly hold them.
    Double(u64),
    /// Any other number: its digits and exponent, `-12e-5` for `-0.000120`.
    Decimal(String),
}

impl Number<'_> {
    /// The integer this number equals exactly, when it fits in 128 bits.
    pub(super) fn integer(&self) -> Option<i128> {
        Decimal::of(self.0).integer()
    }

    pub(super) fn canonical(&self) -> Canonical {
        let decimal = Decimal::of(self.0);
        if let Some(integer) = decimal.integer() {
            return Canonical::Integer(integer);
        }
        // Rust reads a JSON number as the nearest double, and writes a
        // double as its shortest decimal that reads back the same.
        if let Some(double) = self.0.parse::<f64>().ok().filter(|d| d.is_finite()) {
            if Decimal::of(&format!("{double:e}")) == decimal {
                return Canonical::Double(double.to_bits());
            }
        }
        Canonical::Decimal(decimal.to_string())
    }
}

/// A decimal value: `digits` × 10^`exponent`, the digits without leading
/// or trailing zeros (none at all for zero, which has no sign).
#[derive(Debug, PartialEq, Eq)]
struct Decimal<'a> {
    negative: bool,
    digits: Cow<'a, str>,
    exponent: i128,
}

impl<'a> Decimal<'a> {
    /// The value of a number in JSON syntax (or as Rust writes a double
    /// with `{:e}`, a subset). An exponent too large for 128 bits is taken
    /// as the largest that fits.
    fn of(text: &'a str) -> Self {
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
            Some(at) => (&unsigned[..at], &unsigned[at + 1..]),
            None => (unsigned, ""),
        };
        let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let (exponent_negative, exponent_digits) = match exponent.as_bytes().first() {
            Some(b'-') => (true, &exponent[1..]),
            Some(b'+') => (false, &exponent[1..]),
            _ => (false, exponent),
        };
        let written_exponent = exponent_digits.bytes().fold(0i128, |value, digit| {
            value
                .saturating_mul(10)
                .saturating_add(i128::from(digit - b'0'))
        });
        let written_exponent = if exponent_negative {
            -written_exponent
        } else {
            written_exponent
        };
        let digits: Cow<'a, str> = if fraction.is_empty() {
            Cow::Borrowed(whole)
        } else {
            Cow::Owned(format!("{whole}{fraction}"))
        };
        let leading = digits.bytes().take_while(|d| *d == b'0').count();
        let trailing = digits[leading..]
            .bytes()
            .rev()
            .take_while(|d| *d == b'0')
            .count();
        let significant = leading..digits.len() - trailing;
        if significant.is_empty() {
            return Decimal {
                negative: false,
                digits: Cow::Borrowed(""),
                exponent: 0,
            };
        }
        let exponent = written_exponent
            .saturating_sub(fraction.len() as i128)
            .saturating_add(trailing as i128);
        let digits = match digits {
            Cow::Borrowed(text) => Cow::Borrowed(&text[significant]),
            Cow::Owned(text) => Cow::Owned(text[significant].to_owned()),
        };
        Decimal {
            negative,
            digits,
            exponent,
        }
    }

    fn integer(&self) -> Option<i128> {
        if self.digits.is_empty() {
            return Some(0);
        }
        let scale = u32::try_from(self.exponent).ok()?;
        // i128 holds 38 digits whole, some of 39.
        if self.digits.len() + scale as usize > 39 {
            return None;
        }
        let magnitude = self
            .digits
            .parse::<i128>()
            .ok()?
            .checked_mul(10i128.checked_pow(scale)?)?;
        Some(if self.negative { -magnitude } else { magnitude })
    }
}

impl fmt::Display for Decimal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.negative { "-" } else { "" };
        let digits = if self.digits.is_empty() {
            "0"
        } else {
            &self.digits
        };
        write!(f, "{sign}{digits}e{}", self.exponent)
    }
}

/// A payload that is not JSON: what is wrong, at which byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SyntaxError {
    what: &'static str,
    at: usize,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not JSON: {} at byte {}", self.what, self.at)
    }
}

/// A parsed payload.
#[derive(Debug)]
pub(super) struct Parsed<'a> {
    pub(super) value: Value<'a>,
    /// Whether any object in it repeats a key.
    pub(super) repeats: bool,
}

/// Parses one JSON text: UTF-8, one value, whitespace around it.
pub(super) fn parse(bytes: &[u8]) -> Result<Parsed<'_>, SyntaxError> {
    let text = std::str::from_utf8(bytes).map_err(|e| SyntaxError {
        what: "not UTF-8",
        at: e.valid_up_to(),
    })?;
    let mut reader = Reader {
        text,
        at: 0,
        repeats: false,
    };
    reader.skip_whitespace();
    let value = reader.value(0)?;
    reader.skip_whitespace();
    if reader.at < text.len() {
        return Err(reader.error("unexpected text after the value"));
    }
    Ok(Parsed {
        value,
        repeats: reader.repeats,
    })
}

struct Reader<'a> {
    text: &'a str,
    /// The next byte to read.
    at: usize,
    repeats: bool,
}

impl<'a> Reader<'a> {
    fn error(&self, what: &'static str) -> SyntaxError {
        SyntaxError { what, at: self.at }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// A value at the cursor, `depth` containers deep.
    fn value(&mut self, depth: usize) -> Result<Value<'a>, SyntaxError> {
        let rest = &self.text[self.at..];
        let literal = |word: &str| rest.starts_with(word);
        match self.peek() {
            Some(b'{') => self.object(depth + 1).map(Value::Object),
            Some(b'[') => self.array(depth + 1).map(Value::Array),
            Some(b'"') => self.string().map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number().map(Value::Number),
            Some(b't') if literal("true") => {
                self.at += 4;
                Ok(Value::Bool(true))
            }
            Some(b'f') if literal("false") => {
                self.at += 5;
                Ok(Value::Bool(false))
            }
            Some(b'n') if literal("null") => {
                self.at += 4;
                Ok(Value::Null)
            }
            _ => Err(self.error("expected a value")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Object<'a>, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested deeper than 128 levels"));
        }
        self.at += 1;
        let mut members = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Object::new(members));
        }
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a key in quotes"));
            }
            let key = self.string()?;
            self.skip_whitespace();
            if self.peek() != Some(b':') {
                return Err(self.error("expected ':' after a key"));
            }
            self.at += 1;
            self.skip_whitespace();
            let value = self.value(depth)?;
            members.push((key, value));
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    let object = Object::new(members);
                    self.repeats |= object.repeats;
                    return Ok(object);
                }
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Vec<Value<'a>>, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested deeper than 128 levels"));
        }
        self.at += 1;
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(items);
        }
        loop {
            self.skip_whitespace();
            items.push(self.value(depth)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(items);
                }
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }

    /// A string at the cursor (its opening quote), unescaped; borrowed
    /// from the payload when it has no escapes.
    fn string(&mut self) -> Result<Cow<'a, str>, SyntaxError> {
        let opening = self.at;
        let unterminated = SyntaxError {
            what: "a string without its closing quote",
            at: opening,
        };
        let bytes = self.text.as_bytes();
        let mut start = opening + 1;
        let mut owned: Option<String> = None;
        let mut at = start;
        loop {
            match bytes.get(at) {
                None => return Err(unterminated),
                Some(b'"') => {
                    self.at = at + 1;
                    let tail = &self.text[start..at];
                    return Ok(match owned {
                        None => Cow::Borrowed(tail),
                        Some(mut text) => {
                            text.push_str(tail);
                            Cow::Owned(text)
                        }
                    });
                }
                Some(b'\\') => {
                    let text = owned.get_or_insert_with(String::new);
                    text.push_str(&self.text[start..at]);
                    self.at = at;
                    at = self.escape(text).map_err(|e| match e {
                        Escape::Unterminated => unterminated.clone(),
                        Escape::Invalid(error) => error,
                    })?;
                    start = at;
                }
                Some(byte) if *byte < 0x20 => {
                    self.at = at;
                    return Err(self.error("a control character in a string"));
                }
                Some(_) => at += 1,
            }
        }
    }

    /// The escape at the cursor (its backslash), pushed onto `text`;
    /// returns where the string goes on.
    fn escape(&self, text: &mut String) -> Result<usize, Escape> {
        let bytes = self.text.as_bytes();
        let at = self.at;
        let simple = match bytes.get(at + 1) {
            None => return Err(Escape::Unterminated),
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let (c, next) = self.unicode_escape(at)?;
                text.push(c);
                return Ok(next);
            }
            Some(_) => return Err(self.invalid(at, "an unknown escape in a string")),
        };
        text.push(simple);
        Ok(at + 2)
    }

    /// A `\u` escape at `at`, with the second half of a surrogate pair
    /// after it when it is the first.
    fn unicode_escape(&self, at: usize) -> Result<(char, usize), Escape> {
        let unit = |at: usize| -> Result<u32, Escape> {
            let hex = self
                .text
                .get(at + 2..at + 6)
                .filter(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
                .ok_or_else(|| self.invalid(at, "a \\u escape without four hex digits"))?;
            Ok(u32::from_str_radix(hex, 16).expect("four hex digits"))
        };
        let half_pair = || self.invalid(at, "a \\u escape of half a surrogate pair");
        let first = unit(at)?;
        let (code, next) = match first {
            0xD800..=0xDBFF => {
                let low_at = at + 6;
                if self.text.get(low_at..low_at + 2) != Some("\\u") {
                    return Err(half_pair());
                }
                let second = unit(low_at)?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(half_pair());
                }
                (
                    0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00),
                    low_at + 6,
                )
            }
            0xDC00..=0xDFFF => return Err(half_pair()),
            _ => (first, at + 6),
        };
        let c = char::from_u32(code).ok_or_else(half_pair)?;
        Ok((c, next))
    }

    fn invalid(&self, at: usize, what: &'static str) -> Escape {
        Escape::Invalid(SyntaxError { what, at })
    }

    /// A number at the cursor, checked against JSON's grammar.
    fn number(&mut self) -> Result<Number<'a>, SyntaxError> {
        let start = self.at;
        let bytes = self.text.as_bytes();
        let digits_from = |mut at: usize| {
            while bytes.get(at).is_some_and(u8::is_ascii_digit) {
                at += 1;
            }
            at
        };
        let fail = |what| Err(SyntaxError { what, at: start });
        let mut at = start + usize::from(bytes[start] == b'-');
        match bytes.get(at) {
            Some(b'0') if bytes.get(at + 1).is_some_and(u8::is_ascii_digit) => {
                return fail("a number with a leading zero")
            }
            Some(b'0'..=b'9') => at = digits_from(at),
            _ => return fail("a number without digits"),
        }
        if bytes.get(at) == Some(&b'.') {
            let end = digits_from(at + 1);
            if end == at + 1 {
                return fail("a number without digits after its point");
            }
            at = end;
        }
        if matches!(bytes.get(at), Some(b'e' | b'E')) {
            at += 1;
            if matches!(bytes.get(at), Some(b'+' | b'-')) {
                at += 1;
            }
            let end = digits_from(at);
            if end == at {
                return fail("a number without digits in its exponent");
            }
            at = end;
        }
        self.at = at;
        Ok(Number(&self.text[start..at]))
    }
}

/// Why an escape could not be read.
enum Escape {
    /// The payload ends inside it.
    Unterminated,
    Invalid(SyntaxError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> Canonical {
        match parse(text.as_bytes()).unwrap().value {
            Value::Number(number) => number.canonical(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn numbers_read_as_exact_decimals() {
        assert_eq!(
            canonical("2e18"),
            Canonical::Integer(2_000_000_000_000_000_000)
        );
        assert_eq!(canonical("-0.0"), Canonical::Integer(0));
        assert_eq!(canonical("0.2e1"), Canonical::Integer(2));
        assert_eq!(
            canonical("9007199254740993.0"),
            Canonical::Integer(9_007_199_254_740_993)
        );
        assert_eq!(canonical("1e38"), Canonical::Integer(10i128.pow(38)));
        assert_eq!(canonical("0.1"), Canonical::Double(0.1f64.to_bits()));
        assert_eq!(canonical("1e300"), Canonical::Double(1e300f64.to_bits()));
        assert_eq!(
            canonical("0.10000000000000001"),
            Canonical::Decimal("10000000000000001e-17".into())
        );
        assert_eq!(canonical("-1E400"), Canonical::Decimal("-1e400".into()));
        assert_eq!(
            canonical("1e99999999999999999999999999999999999999999"),
            Canonical::Decimal(format!("1e{}", i128::MAX))
        );
    }

    #[test]
    fn strings_are_unescaped_and_surrogates_paired() {
        let parsed =
            parse(br#"["a\"b\\\/\b\f\n\r\t", "\u0050\u00e9\ud83d\ude00", "plain"]"#).unwrap();
        let items = parsed.value.as_array().unwrap();
        assert_eq!(items[0].as_str(), Some("a\"b\\/\u{8}\u{c}\n\r\t"));
        assert_eq!(items[1].as_str(), Some("Pé😀"));
        assert!(matches!(items[2], Value::String(Cow::Borrowed("plain"))));
        for (text, what) in [
            (&br#""\ud83d""#[..], "a \\u escape of half a surrogate pair"),
            (br#""\ude00""#, "a \\u escape of half a surrogate pair"),
            (br#""\u12""#, "a \\u escape without four hex digits"),
            (br#""\x""#, "an unknown escape in a string"),
            (b"\"a\tb\"", "a control character in a string"),
            (b"\"a\\", "a string without its closing quote"),
        ] {
            assert_eq!(
                parse(text).unwrap_err().what,
                what,
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(deep.as_bytes()).is_ok());
        let deeper = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(
            parse(deeper.as_bytes()).unwrap_err(),
            SyntaxError {
                what: "nested deeper than 128 levels",
                at: MAX_DEPTH
            }
        );
    }

    #[test]
    fn a_repeated_key_is_found_with_its_path_in_small_and_large_objects() {
        let many: String = (0..40).map(|i| format!(r#""k{i}":{i},"#)).collect();
        for members in ["", many.as_str()] {
            let text = format!(r#"{{"a":{{"b":[1,{{{members}"c":1,"c":2}}]}}}}"#);
            let parsed = parse(text.as_bytes()).unwrap();
            assert!(parsed.repeats);
            let object = parsed.value.as_object().unwrap();
            assert_eq!(object.first_repeat(), Some(("a.b[1]".into(), "c")));
        }
        let parsed = parse(br#"{"a":1,"a":2,"b":3}"#).unwrap();
        let object = parsed.value.as_object().unwrap();
        assert!(object.get("a").is_none(), "a repeated key has no one value");
        assert_eq!(object.get("b").and_then(Value::as_integer), Some(3));
        assert!(!parse(br#"{"a":{"a":1}}"#).unwrap().repeats);
    }
}
