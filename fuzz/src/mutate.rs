//! A small structure-aware mutation engine over text inputs.

/// xorshift64*: fast, seedable, reproducible from the seed a run prints.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is mapped to a fixed non-zero state).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Values that break parsers and arithmetic: signs, widths, float edge cases, wrong types.
const INTERESTING: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "8",
    "15",
    "16",
    "17",
    "31",
    "32",
    "33",
    "64",
    "100",
    "255",
    "256",
    "1000",
    "1024",
    "4096",
    "65535",
    "65536",
    "1048576",
    "1048577",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "-64",
    "64.0",
    "0.5",
    "1e-300",
    "1e300",
    "1e39",
    "1e-39",
    "-0.0",
    "NaN",
    "inf",
    "-inf",
    "\"64\"",
    "true",
    "false",
    "Bf16",
    "r#1",
    "()",
    "[]",
    "None",
    "Some(1)",
];

/// Mutates texts by replacing values, deleting, duplicating and swapping lines, splicing
/// bytes and truncating.
#[derive(Clone, Debug)]
pub struct Mutator {
    /// The generator.
    pub rng: Rng,
}

impl Mutator {
    /// A mutator seeded with `seed`.
    pub fn new(seed: u64) -> Mutator {
        Mutator {
            rng: Rng::new(seed),
        }
    }

    /// `text` after 1 to 4 mutations (as bytes: some mutations leave invalid UTF-8).
    pub fn mutate(&mut self, text: &str) -> Vec<u8> {
        let mut out = text.as_bytes().to_vec();
        for _ in 0..1 + self.rng.below(4) {
            out = self.once(out);
        }
        out
    }

    fn once(&mut self, bytes: Vec<u8>) -> Vec<u8> {
        match self.rng.below(10) {
            0..=4 => self.replace_value(bytes),
            5 => self.edit_lines(bytes, |lines, r| {
                if !lines.is_empty() {
                    lines.remove(r.below(lines.len()));
                }
            }),
            6 => self.edit_lines(bytes, |lines, r| {
                if !lines.is_empty() {
                    let i = r.below(lines.len());
                    let l = lines[i].clone();
                    lines.insert(r.below(lines.len() + 1), l);
                }
            }),
            7 => self.edit_lines(bytes, |lines, r| {
                if lines.len() > 1 {
                    let (a, b) = (r.below(lines.len()), r.below(lines.len()));
                    lines.swap(a, b);
                }
            }),
            8 => {
                let mut b = bytes;
                let at = self.rng.below(b.len() + 1);
                let junk: Vec<u8> = (0..1 + self.rng.below(8))
                    .map(|_| match self.rng.below(4) {
                        0 => 0xff,
                        1 => b"(),:[]\"/"[self.rng.below(8)],
                        _ => (self.rng.next_u64() & 0xff) as u8,
                    })
                    .collect();
                b.splice(at..at, junk);
                b
            }
            _ => {
                let mut b = bytes;
                let at = self.rng.below(b.len() + 1);
                b.truncate(at);
                b
            }
        }
    }

    /// Replaces one value token (after a `:` or inside a list) with an interesting value or
    /// a random number.
    fn replace_value(&mut self, bytes: Vec<u8>) -> Vec<u8> {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let starts: Vec<usize> = text
            .char_indices()
            .filter(|&(i, c)| {
                (c.is_ascii_alphanumeric() || c == '-' || c == '"')
                    && text[..i].trim_end().ends_with([':', '[', ',', '('])
            })
            .map(|(i, _)| i)
            .collect();
        if starts.is_empty() {
            return bytes;
        }
        let at = starts[self.rng.below(starts.len())];
        let len = text[at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || "._-+\"#".contains(c)))
            .unwrap_or(text.len() - at);
        let value = match self.rng.below(3) {
            0 => (self.rng.next_u64() % 100_000).to_string(),
            1 => (1u64 << self.rng.below(40)).to_string(),
            _ => INTERESTING[self.rng.below(INTERESTING.len())].to_string(),
        };
        let mut s = text;
        s.replace_range(at..at + len, &value);
        s.into_bytes()
    }

    fn edit_lines(
        &mut self,
        bytes: Vec<u8>,
        f: impl FnOnce(&mut Vec<Vec<u8>>, &mut Rng),
    ) -> Vec<u8> {
        let mut lines: Vec<Vec<u8>> = bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        f(&mut lines, &mut self.rng);
        lines.join(&b'\n')
    }
}
