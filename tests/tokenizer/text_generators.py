"""Seeded generators of hard tokenizer inputs: every Unicode category, whitespace runs,
digit runs, contractions in any case, emoji sequences, CJK, combining marks, special-token
strings inside text, long inputs, and strings that look broken but are valid UTF-8."""

import random
import sys
import unicodedata

_POOLS = None
_EXCLUDED = frozenset()


def is_noncharacter(cp):
    return 0xFDD0 <= cp <= 0xFDEF or (cp & 0xFFFE) == 0xFFFE


def set_excluded(chars):
    """Characters the generators must not produce (see version_sensitive_chars)."""
    global _EXCLUDED, _POOLS
    _EXCLUDED = frozenset(chars)
    _POOLS = None


def category_pools():
    """Code points by general category. Surrogates are left out (they cannot be encoded), and
    of the unassigned (Cn) code points only the noncharacters, which stay unassigned in every
    Unicode version; others may be assigned in the newer tables some libraries use."""
    global _POOLS
    if _POOLS is None:
        pools = {}
        for cp in range(sys.maxunicode + 1):
            ch = chr(cp)
            cat = unicodedata.category(ch)
            if cat == "Cs" or (cat == "Cn" and not is_noncharacter(cp)) or ch in _EXCLUDED:
                continue
            pools.setdefault(cat, []).append(ch)
        _POOLS = pools
    return _POOLS


def version_sensitive_chars(normalize):
    """Characters whose normalization under `normalize(form, text)` (e.g. by the `tokenizers`
    package, whose tables are Unicode 9.0) differs from Python's unicodedata (Unicode 14) in
    any of the four forms: combining marks and decompositions added since."""
    out = set()
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat in ("Cs", "Cn"):
            continue
        if unicodedata.combining(ch) == 0 and not unicodedata.decomposition(ch) and cat[0] != "M":
            continue
        # Reordering against marks of class 240 and 216 reveals the combining class; the
        # character alone and after a base reveals (de)composition.
        probes = ("a\u0345" + ch, "a\u031b" + ch + "\u0345", ch, "e" + ch, ch + "\u0301")
        if any(normalize(form, p) != unicodedata.normalize(form, p)
               for form in ("NFC", "NFD", "NFKC", "NFKD") for p in probes):
            out.add(ch)
    return out


WHITESPACE = [" ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", "\x0b", "\x0c", "\u00a0", "\u1680",
              "\u2000", "\u2003", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f",
              "\u3000", "\u0085", "\u180e", "\u200b", "\ufeff", " \n ", "\t\t", "\r\r\n"]
WORDS = ["the", "The", "HELLO", "world", "naïve", "café", "über", "straße", "İstanbul", "ǅemal",
         "ﬁnance", "Ⅻ", "x", "I", "a", "don", "it", "we", "they", "_var", "foo_bar", "Ωmega",
         "résumé", "Ελληνικά", "русский", "עברית", "العربية", "हिन्दी", "ภาษาไทย", "ქართული"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Re", "'rE",
                "'VE", "'M", "'LL", "'Ll", "'D", "'ſ", "'K", "'x", "'", "''", "’s", "'s'",
                "'LLL", "'dd"]
DIGITS = ["0", "7", "12", "123", "1234", "12345678901234567890", "٣٤٥", "१२३", "１２３", "²",
          "½", "Ⅻ", "3.14", "1,000", "-5", "1e10", "0x1F", "๓", "߀", "𝟘𝟙"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸", "🇯🇵🇰🇷", "#️⃣", "❤️", "🧑🏿‍💻", "🫠",
         "👩‍❤️‍💋‍👨", "☺", "✈️", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "\U0001F1E6", "🤌🏻", "⌚", "©️"]
CJK = ["中文", "日本語のテキスト", "한국어", "漢字仮名交じり文", "汉字", "ｶﾀｶﾅ", "、。「」",
       "𠀀𠀁", "㐀", "々", "ㄅㄆ", "가나다", "\u1100\u1161\u11a8", "\u1100\u1161", "각\u11a8"]
MARKS = ["\u0301", "\u0300", "\u0308", "\u0327", "\u0323", "\u0302", "\u0338", "\u20dd",
         "\u093c", "\u0b3e", "\u0e49", "\u05b7", "\u0651", "\u1ab0", "\u0345", "\u3099",
         "\u309a", "\ufe0f", "\u200d", "\u0f71", "\u0f72"]
LOOKALIKES = ["\ufffd", "\ufeff", "\ufffe", "\uffff", "\U0010ffff", "\U000e0001", "\ue000",
              "\x00", "\x01", "\x7f", "\x80", "\x9f", "Ġ", "Ċ", "âĢĻ", "ĠĠ", "Ã©", "ï¿½",
              "\u00ad", "\u2060", "\u034f", "\U0001d11e", "\\x80", "%C3%A9", "\\u00e9"]
CODE = ["def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
        "<div class=\"a\">&nbsp;</div>", "SELECT * FROM t WHERE id=1;", "x+=1;y-=2",
        "#include <vector>", "    \n\n    ", "a->b", "$$\\frac{1}{2}$$", "https://example.com/?q=1&r=2",
        "ls -la | grep '.py'", "{\"key\": [1, 2.5, null]}", "i++ // comment", "\"\"\"doc\"\"\""]


def random_char(rng, categories=None):
    pools = category_pools()
    cat = rng.choice(categories or sorted(pools))
    return rng.choice(pools[cat])


def random_category_text(rng, n):
    return "".join(random_char(rng) for _ in range(n))


def mixed_text(rng, pieces, special_tokens=()):
    """Concatenates random fragments of every kind above."""
    kinds = [WHITESPACE, WORDS, CONTRACTIONS, DIGITS, EMOJI, CJK, LOOKALIKES, CODE]
    out = []
    for _ in range(pieces):
        r = rng.random()
        if r < 0.08:
            out.append(random_category_text(rng, rng.randint(1, 4)))
        elif r < 0.14:
            base = rng.choice("aeiouAEOnNcCzZsS가ㄱ" + random_char(rng, ["Ll", "Lu", "Lo"]))
            out.append(base + "".join(rng.choice(MARKS) for _ in range(rng.randint(1, 4))))
        elif r < 0.20 and special_tokens:
            tok = rng.choice(special_tokens)
            if rng.random() < 0.2:
                tok = tok[: rng.randint(1, len(tok))]  # a prefix that must not match
            out.append(tok)
        else:
            out.append(rng.choice(rng.choice(kinds)))
    return "".join(out)


def whitespace_text(rng):
    parts = []
    for _ in range(rng.randint(1, 8)):
        parts.append("".join(rng.choice(WHITESPACE) for _ in range(rng.randint(0, 4))))
        parts.append(rng.choice(WORDS + DIGITS + CONTRACTIONS + ["!", "?", ".", "..."]))
    return "".join(parts)


def contraction_text(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        parts.append(rng.choice(WORDS + ["", " ", "I", "you"]))
        parts.append(rng.choice(CONTRACTIONS))
        parts.append(rng.choice(["", " ", "\n", "s", "S", "ll", "!"]))
    return "".join(parts)


def digit_text(rng):
    return "".join(rng.choice(DIGITS + [" ", "", ".", ","]) for _ in range(rng.randint(1, 10)))


def emoji_text(rng):
    return "".join(rng.choice(EMOJI + [" ", "", "a", "\u200d", "\ufe0f", "\U0001f3fb"])
                   for _ in range(rng.randint(1, 8)))


def cjk_text(rng):
    return "".join(rng.choice(CJK + [" ", "", "abc", "123", "！", "\u3000"])
                   for _ in range(rng.randint(1, 8)))


def long_texts(rng, size=100_000):
    """A few inputs of about `size` bytes each, of very different shapes."""
    prose = []
    while sum(len(p.encode()) for p in prose) < size:
        prose.append(mixed_text(rng, 20))
    return ["".join(prose),
            "a" * size,
            " " * size,
            "1" * size,
            "\n" * (size // 2) + "x",
            "😀" * (size // 4),
            "中" * (size // 3),
            ("e\u0301" * (size // 3)),
            ("ab " * (size // 3)) + "'s"]


def generate_cases(seed, count, special_tokens=()):
    rng = random.Random(seed)
    makers = [
        lambda: mixed_text(rng, rng.randint(1, 12), special_tokens),
        lambda: random_category_text(rng, rng.randint(1, 16)),
        lambda: whitespace_text(rng),
        lambda: contraction_text(rng),
        lambda: digit_text(rng),
        lambda: emoji_text(rng),
        lambda: cjk_text(rng),
    ]
    cases = ["", " ", "\n", "a", " a", "a ", "'s", "\r\n", "  \n  "]
    while len(cases) < count:
        cases.append(rng.choice(makers)())
    return cases
