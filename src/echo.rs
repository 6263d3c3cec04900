//! Quoting user input in error messages without echoing all of it: a 50 MB file of random
//! text must give a message of a few hundred bytes, not the file.

/// At most `max` bytes of `s` (cut at a character boundary), with the number of bytes left
/// out when it was cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} more bytes)", &s[..end], s.len() - end)
}

/// A name, key or value from the user's input, as quoted in a message (64 bytes at most).
pub fn value(s: &str) -> String {
    clip(s, 64)
}

#[cfg(test)]
#[test]
fn clips_at_char_boundaries() {
    assert_eq!(clip("abc", 3), "abc");
    assert_eq!(clip("abcd", 3), "abc... (1 more bytes)");
    // 'é' is two bytes: a cut inside it backs up to the boundary before it.
    assert_eq!(clip("aé", 2), "a... (2 more bytes)");
}
