#!/usr/bin/env python3
"""Writes the deterministic mixed text used to benchmark tokenizer encoding: English-like
prose, source code, Chinese and Japanese, emoji and numbers, in blocks of a few KB.

    python3 tools/tokenizer_bench_text.py OUT_FILE [--mb 10] [--seed 0]
"""

import argparse
import random

WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at "
         "which but have an they you were her she there been one all we their has would when "
         "what more if no out so said up its about into than them can only other new some time "
         "could these two may then do first any my now such like our over man me even most made "
         "after also did many before must through back years where much your way well down "
         "should because each just those people how too little state good very make world still "
         "own see men work long get here between both life being under never day same another "
         "know while last might us great old year off come since against go came right used take "
         "three tokenizer inference engine throughput latency scheduler memory attention kernel "
         "batch sequence prefix cache block model weights layer GPU tensor parallel decoding "
         "internationalization misunderstanding extraordinary responsibilities").split()
NAMES = "Alice Bob Carol Dave Eve Mallory London Paris Tokyo Berlin Qwen Llama OpenAI Linux".split()
CODE_TOKENS = ("def class return if else elif for while in import from self None True False "
               "int float str list dict size_t const auto std::vector template typename struct "
               "nullptr static_cast for_each emplace_back reserve begin end".split())
HANZI_COMMON = ("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着"
                "去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主"
                "行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二"
                "理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走"
                "电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市"
                "眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提")
KANA = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん"
EMOJI = ["😀", "😂", "👍", "🎉", "❤️", "🔥", "🚀", "👨‍💻", "🇺🇸", "🇯🇵", "👍🏽", "✨", "🤔", "🙏"]


def prose(rng, n):
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(5, 25))]
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words)), rng.choice(NAMES))
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words)), rng.choice(["don't", "it's", "we'll", "they're"]))
        sentence = " ".join(words)
        out.append(sentence[0].upper() + sentence[1:] + rng.choice([".", ".", ".", "?", "!", ";"]))
    return " ".join(out) + "\n\n"


def code(rng, n):
    lines = []
    indent = 0
    for _ in range(n):
        ident = "_".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
        kind = rng.random()
        if kind < 0.3:
            lines.append("    " * indent + f"def {ident}(self, x: int = {rng.randint(0, 99)}):")
            indent = min(indent + 1, 4)
        elif kind < 0.6:
            lines.append("    " * indent + f"{ident} = {rng.choice(CODE_TOKENS)}({ident}[{rng.randint(0, 9)}]) + {rng.random():.4f}")
        elif kind < 0.8:
            lines.append("\t" * indent + f"for (size_t i = 0; i < {ident}.size(); ++i) {{ sum += {ident}[i]; }}")
        else:
            lines.append("    " * indent + f"return {ident}  # {rng.choice(WORDS)} {rng.choice(WORDS)}")
            indent = max(indent - 1, 0)
    return "\n".join(lines) + "\n\n"


def cjk(rng, n):
    out = []
    for _ in range(n):
        sentence = "".join(rng.choice(HANZI_COMMON) for _ in range(rng.randint(8, 30)))
        if rng.random() < 0.3:
            sentence += "".join(rng.choice(KANA) for _ in range(rng.randint(3, 10)))
        out.append(sentence + rng.choice(["。", "，", "！", "？"]))
    return "".join(out) + "\n\n"


def emoji_and_numbers(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.3:
            out.append(rng.choice(EMOJI) * rng.randint(1, 3))
        elif r < 0.6:
            out.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
        elif r < 0.8:
            out.append(f"{rng.uniform(-1000, 1000):.{rng.randint(1, 6)}f}")
        else:
            out.append(f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}")
        out.append(rng.choice([" ", " ", ", ", "\n", " | "]))
    return "".join(out) + "\n\n"


def generate(size_bytes, seed):
    rng = random.Random(seed)
    makers = [(prose, 0.5), (code, 0.2), (cjk, 0.15), (emoji_and_numbers, 0.15)]
    blocks, total = [], 0
    while total < size_bytes:
        maker = rng.choices([m for m, _ in makers], weights=[w for _, w in makers])[0]
        block = maker(rng, rng.randint(5, 40))
        blocks.append(block)
        total += len(block.encode())
    return "".join(blocks)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--mb", type=float, default=10.0, help="size in MB (10^6 bytes)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    text = generate(int(args.mb * 1e6), args.seed)
    with open(args.out, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    print(f"wrote {len(text.encode())} bytes, {text.count(chr(10))} lines to {args.out}")


if __name__ == "__main__":
    main()
