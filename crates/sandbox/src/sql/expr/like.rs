//! LIKE pattern matching: `%`, `_`, `[abc]`, `[a-f]`, `[^a]`, ESCAPE,
//! case-insensitive under the default collation, case-sensitive under a
//! case-sensitive or binary one.
//!
//! <https://learn.microsoft.com/sql/t-sql/language-elements/like-transact-sql>

fn upper(c: char) -> char {
    c.to_uppercase().next().unwrap_or(c)
}

fn same(c: char) -> char {
    c
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Any,
    One,
    Char(char),
    /// A bracketed set: negated, single characters and ranges.
    Set(bool, Vec<(char, char)>),
}

fn compile(pattern: &str, escape: Option<char>, fold: fn(char) -> char) -> Vec<Token> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if Some(c) == escape {
            if let Some(next) = chars.get(i + 1) {
                out.push(Token::Char(fold(*next)));
                i += 2;
            } else {
                out.push(Token::Char(fold(c)));
                i += 1;
            }
            continue;
        }
        match c {
            '%' => {
                if out.last() != Some(&Token::Any) {
                    out.push(Token::Any);
                }
            }
            '_' => out.push(Token::One),
            '[' => {
                // Find the closing bracket; a ']' right after '[' or '[^'
                // is a literal member.
                let mut j = i + 1;
                let negated = chars.get(j) == Some(&'^');
                if negated {
                    j += 1;
                }
                let start = j;
                let mut close = None;
                let mut k = start;
                while k < chars.len() {
                    if chars[k] == ']' && k > start {
                        close = Some(k);
                        break;
                    }
                    k += 1;
                }
                match close {
                    None => out.push(Token::Char('[')),
                    Some(end) => {
                        let body = &chars[start..end];
                        let mut set = Vec::new();
                        let mut m = 0;
                        while m < body.len() {
                            if m + 2 < body.len() && body[m + 1] == '-' {
                                set.push((fold(body[m]), fold(body[m + 2])));
                                m += 3;
                            } else {
                                set.push((fold(body[m]), fold(body[m])));
                                m += 1;
                            }
                        }
                        out.push(Token::Set(negated, set));
                        i = end + 1;
                        continue;
                    }
                }
            }
            other => out.push(Token::Char(fold(other))),
        }
        i += 1;
    }
    out
}

fn matches_one(t: &Token, c: char) -> bool {
    match t {
        Token::One => true,
        Token::Char(x) => *x == c,
        Token::Set(neg, set) => set.iter().any(|(a, b)| *a <= c && c <= *b) != *neg,
        Token::Any => true,
    }
}

/// True when `text` matches `pattern`, case-insensitively.
#[cfg(test)]
pub fn like(text: &str, pattern: &str, escape: Option<char>) -> bool {
    like_in(text, pattern, escape, false)
}

/// [`like`], case-sensitively when `case_sensitive` (a case-sensitive or
/// binary collation).
pub fn like_in(text: &str, pattern: &str, escape: Option<char>, case_sensitive: bool) -> bool {
    let fold: fn(char) -> char = if case_sensitive { same } else { upper };
    let tokens = compile(pattern, escape, fold);
    let text: Vec<char> = text.chars().map(fold).collect();
    // reach[j]: the first i tokens can match text[..j].
    let mut reach = vec![false; text.len() + 1];
    reach[0] = true;
    for t in &tokens {
        let mut next = vec![false; text.len() + 1];
        match t {
            Token::Any => {
                let mut on = false;
                for j in 0..=text.len() {
                    on |= reach[j];
                    next[j] = on;
                }
            }
            _ => {
                for j in 0..text.len() {
                    if reach[j] && matches_one(t, text[j]) {
                        next[j + 1] = true;
                    }
                }
            }
        }
        reach = next;
        if !reach.iter().any(|r| *r) {
            return false;
        }
    }
    reach[text.len()]
}

#[cfg(test)]
mod tests {
    use super::like;

    #[test]
    fn patterns() {
        let cases: &[(&str, &str, Option<char>, bool)] = &[
            ("abc", "abc", None, true),
            ("ABC", "abc", None, true),
            ("abc", "a%", None, true),
            ("abc", "%c", None, true),
            ("abc", "%b%", None, true),
            ("abc", "a_c", None, true),
            ("abc", "a__c", None, false),
            ("abc", "ab", None, false),
            ("", "%", None, true),
            ("", "_", None, false),
            ("b", "[abc]", None, true),
            ("d", "[abc]", None, false),
            ("d", "[^abc]", None, true),
            ("a", "[^abc]", None, false),
            ("E", "[a-f]", None, true),
            ("g", "[a-f]", None, false),
            ("50%", "50[%]", None, true),
            ("50x", "50[%]", None, false),
            ("a_b", "a!_b", Some('!'), true),
            ("axb", "a!_b", Some('!'), false),
            ("100%", "%!%", Some('!'), true),
            ("a]b", "a]b", None, true),
            ("a[b", "a[b", None, true),
            ("x-y", "x[-]y", None, true),
            ("mississippi", "%iss%ipp%", None, true),
            ("mississippi", "%iss%x%", None, false),
        ];
        for (text, pattern, esc, want) in cases {
            assert_eq!(like(text, pattern, *esc), *want, "{text} LIKE {pattern}");
        }
    }
}
