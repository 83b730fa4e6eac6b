#!/usr/bin/env python3
"""Reference tokenizations from llama.cpp (via llama-cpp-python) for Plinth's tokenizer tests.

For each model, every string below is tokenized with `special=False` and `special=True`
(and, for a subset, with `add_bos=True` too, which for these models adds nothing); the fixture
keeps the ids, llama.cpp's detokenization where it differs from the input, the special token
ids and the end-of-generation set, and the piece bytes of a sample of tokens.

Dev-time only: `pip install llama-cpp-python==0.3.36` builds llama.cpp from source.
Usage: python3 Scripts/make_tokenizer_fixtures.py [smollm2|qwen25|gemma3 ...]
Writes Tests/PlinthRuntimeTests/Fixtures/tokenizer/<name>.json.
"""
import ctypes, json, os, random, sys
import llama_cpp

HOME = os.environ.get("PLINTH_HOME", os.path.expanduser("~/.cache/plinth"))
MODELS = {
    "smollm2": f"{HOME}/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen25": f"{HOME}/models/Qwen2.5-Coder-0.5B-Instruct/Qwen2.5-Coder-0.5B-Instruct.gguf",
    "gemma3": f"{HOME}/models/Gemma-3-270M/gemma-3-270m-q4_k_m.gguf",
}
# Sampling stride of the token pieces kept (every non-normal token is kept too).
PIECE_STRIDE = {"gemma3": 97}
# Strings for one model only: its own special tokens and what its tokenizer treats specially.
EXTRA = {
    "gemma3": [
        "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
        "<bos><start_of_turn>user\nhi<end_of_turn>",
        "<start_of_turn>", "<end_of_turn>", "<start_of_turn", "start_of_turn>", "<eos>", "<pad>", "<mask>",
        "<unused0><unused12> <unused99>", "[multimodal]", "<start_of_image><end_of_image>",
        "<table><tr><td>cell</td></tr></table>", "<div class=\"x\">text</div><br/>", "<h1>Title</h1>\n<p>para</p>",
        "a  b   c    d     e", "  leading spaces", "trailing spaces   ", "\t\ttabs\t", "\n\n\n\n\n\nnewlines",
        "line\n\nparagraph\n\n\nmore", "▁already▁escaped▁", "▁", "▁▁ ▁",
        "<0x41> is not a byte token in text", "\x00nul and \x7f del",
        # the one token with a character before ▁ (`>▁</`): merges may cross a word boundary there
        "<b> </b>", "x> </y", ">  </", "a > </ b", "<i> </i> <u> </u>",
    ],
}
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "PlinthRuntimeTests", "Fixtures", "tokenizer")

# ---------------------------------------------------------------------------------------------
# The strings. Hand-written cases first, then generated ones (fixed seed). The fixture stores
# the strings themselves, so it stays the source of truth even if Python's RNG changes.

HAND = [
    # plain English, punctuation, case
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG",
    "Hello World, HELLO WORLD, hello world, hElLo WoRlD",
    "Mr. Smith went to Washington... and then? He left! (Really.)",
    "e.g. i.e. etc. vs. U.S.A. A.I.",
    "well-known, state-of-the-art, re-enter -- em—dash – en–dash",
    "quotes: \"double\" 'single' «guillemets» „German“ “curly” ‘curly’",
    "semi;colon:colon/slash\\backslash|pipe",
    "!!!???...,,,;;;:::",
    "a,b,c,d",
    "@user #hashtag $100 %50 ^caret &and *star",
    "~tilde `backtick` _under_score_ +plus= <less> [brackets] {braces}",
    # contractions
    "it's don't we're I've I'm you'll he'd",
    "IT'S DON'T WE'RE I'VE I'M YOU'LL HE'D",
    "It'S dOn'T We'Re",
    "'s 't 're 've 'm 'll 'd",
    "'S 'T 'RE 'VE 'M 'LL 'D",
    "rock 'n' roll, O'Neil, 'twas, y'all, ma'am",
    "'''quoted''' and ''double''",
    "the cat's toy, the cats' toys",
    "'",
    "'s",
    "x's",
    " 's",
    "can't've",
    "’s curly apostrophe isn’t ASCII",
    # numbers
    "0", "7", "42", "123", "1234", "12345", "123456", "1234567", "12345678", "123456789",
    "1234567890", "12345678901234567890", "3141592653589793238462643383279502884197",
    " 1", " 12", " 123", " 1234", "x1", "x12", "x1234",
    "3.14159", "-42", "+7", "1,000,000", "1.000.000,50", "1e10", "6.022e23", "0x1F", "0b1010",
    "v1.2.3", "2024-01-15", "12:30:45", "$1,234.56", "50%", "1/2", "3:2", "#1", "No.5",
    "Call 555-123-4567 or +1 (800) 555-0199",
    "٠١٢٣٤٥٦٧٨٩ Arabic-Indic digits",
    "१२३४ Devanagari digits",
    "１２３ fullwidth digits",
    "x²+y³=z⁴ superscripts",
    "½ ¼ ¾ fractions",
    "Ⅻ Ⅳ roman numerals",
    "①②③ circled",
    "1st 2nd 3rd 4th 21st 100th",
    "abc123def456",
    "a1b2c3",
    "99 bottles of beer on the wall, 99 bottles of beer.",
    # whitespace
    " ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", "\r", " \n", "\n ",
    " \t \n \r\n ",
    "a b", "a  b", "a   b", "a    b", "a\tb", "a\t\tb", "a\nb", "a\n\nb", "a\r\nb", "a \nb", "a\n b",
    "  leading spaces", "trailing spaces  ", "  both  ", " x", "x ", "\tindent", "line\n",
    "word1 \n  word2\t\n\tword3",
    "    def indented():\n        return 1\n",
    "\u00a0non-breaking\u00a0space",
    "ideographic\u3000space",
    "thin\u2009space and hair\u200aspace",
    "zero\u200bwidth\u200bspace",
    "line\u2028separator\u2029paragraph",
    "next\u0085line",
    "form\x0cfeed and vertical\x0btab",
    "file\x1cseparator",
    "  \u00a0  mixed \u3000 spaces",
    "a \u00a0b",
    "end with newline\n\n",
    # code
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "import numpy as np\nx = np.array([1, 2, 3], dtype=np.float32)\nprint(x.mean())",
    "class Foo(Bar):\n    def __init__(self, *args, **kwargs):\n        super().__init__(*args, **kwargs)\n",
    "func greet(_ name: String) -> String {\n    return \"Hello, \\(name)!\"\n}\n",
    "let xs: [Int] = (0..<10).map { $0 * $0 }.filter { $0 % 2 == 0 }",
    "#include <stdio.h>\n\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for (int i = 0; i < n; ++i) { a[i] += b[i] * c; }",
    "const add = (a, b) => a + b;\nconsole.log(`sum: ${add(1, 2)}`);",
    "fn main() {\n    let v: Vec<u32> = vec![1, 2, 3];\n    println!(\"{:?}\", v);\n}",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
    "SELECT u.id, COUNT(*) AS n FROM users u JOIN orders o ON o.user_id = u.id WHERE u.age >= 18 GROUP BY u.id;",
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>Test</title></head>\n<body><p class='x'>Hi &amp; bye</p></body>\n</html>",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo \"$f\" | wc -c; done\n",
    "x = {'a': 1, \"b\": [2, 3], 'c': None}",
    "if (a && b || !c) { return a != b ? a : b; } // comment",
    "/* block\n * comment\n */",
    "std::vector<std::string> v{\"a\", \"b\"};",
    "a->b, a::b, a=>b, a<=b, a>=b, a===b, a!==b, a**=2, a//=3, a<<=1, a>>>=2",
    "matrix[i][j] = matrix[j][i]",
    "print(f\"{x:>10.3f}\")",
    "\t\tif x:\n\t\t\tpass\n",
    "    \n    \n",
    "}\n\n\n}",
    "end;\r\nbegin\r\n",
    "λx.x → ∀x∈ℝ: x² ≥ 0",
    # structured text
    "{\"name\": \"Alice\", \"age\": 30, \"tags\": [\"a\", \"b\"], \"ok\": true, \"n\": null}",
    "{\"nested\":{\"deep\":{\"deeper\":[1,2.5,-3e-4,{\"k\":\"v\"}]}}}",
    "[{\"id\":1},{\"id\":2}]",
    "key: value\nlist:\n  - one\n  - two\n",
    "# Title\n\n## Subtitle\n\n- item one\n- item **two**\n\n1. first\n2. _second_\n\n> quote\n\n`code` and ```\nblock\n```\n",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "[link](https://example.com/path?q=1&r=2#frag) ![img](a.png)",
    "https://www.example.com/some/path/index.html?query=value&other=123#section",
    "http://localhost:8080/api/v1/users/42",
    "ftp://user:pass@host.example.org:21/file.tar.gz",
    "mailto:someone@example.com, first.last+tag@sub.domain.co.uk",
    "C:\\Users\\Name\\Documents\\file.txt",
    "/usr/local/bin/python3 --version",
    "~/.cache/plinth/models/SmolLM2-135M-Instruct.gguf",
    "<div><span>nested</span></div>",
    "a=1&b=2&c=%20encoded%2Fslash",
    "SGVsbG8gV29ybGQhIFRoaXMgaXMgYmFzZTY0Lg==",
    "550e8400-e29b-41d4-a716-446655440000",
    "d41d8cd98f00b204e9800998ecf8427e",
    # other scripts
    "你好，世界！今天天气很好。",
    "我爱自然语言处理和机器学习。",
    "日本語のテキストです。カタカナとひらがな、漢字を含みます。",
    "東京は日本の首都です",
    "안녕하세요, 세계! 한국어 문장입니다.",
    "مرحبا بالعالم! هذه جملة عربية.",
    "السَّلَامُ عَلَيْكُمْ",
    "שלום עולם, זה משפט בעברית.",
    "नमस्ते दुनिया! यह हिंदी में एक वाक्य है।",
    "क्षत्रिय ज्ञान श्रीमान",
    "Привет, мир! Это предложение на русском языке.",
    "Γειά σου Κόσμε! Αυτή είναι μια ελληνική πρόταση.",
    "สวัสดีชาวโลก นี่คือประโยคภาษาไทย",
    "Xin chào thế giới! Đây là một câu tiếng Việt.",
    "வணக்கம் உலகம்",
    "გამარჯობა მსოფლიო",
    "Բարեւ աշխարհ",
    "ሰላም ለዓለም",
    "Здравей, свят! Українська: Ґґ Єє Її",
    "Ünïcödé àccénts: café, naïve, résumé, São Paulo, Zürich, Ångström, Øresund, Łódź",
    "straße STRASSE ß ẞ",
    "ǅ ǈ ǋ titlecase digraphs",
    "ﬁ ﬂ ligatures",
    "ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ",
    "English中文混合text日本語mixed한국어",
    "Hello мир 世界 مرحبا 🌍",
    "abcабв",
    "ᚠᛇᚻ runes",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕄𝕒𝕥𝕙 𝒮𝒸𝓇𝒾𝓅𝓉",
    "𐍈 Gothic and 𓀀 hieroglyph",
    "𠀀𠀁 CJK extension B",
    # combining marks
    "e\u0301 n\u0303 a\u0308",
    "cafe\u0301",
    "a\u0308\u0304 stacked",
    "Z\u0337\u0322\u031ba\u0338l\u0334g\u0335o\u0336",
    "\u0301 leading combining mark",
    " \u0301 space then mark",
    "x\u20dd enclosing",
    "क़ ड़ nukta",
    # emoji
    "😀", "😀😃😄", "I ❤️ you", "👍🏽 thumbs", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "🇺🇸🇫🇷🇯🇵 flags",
    "🧑🏿‍💻 coder", "1️⃣ keycap", "©️ ®️ ™️", "🤖💬✨🚀", "emoji😀inside", "😀 😀  😀",
    "👩‍❤️‍💋‍👨", "🫠🫡🫶 newer emoji", "⌚⌛⏰", "☀️🌤️⛅",
    # special-token text
    "<|im_start|>user\nhi<|im_end|>",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "<|endoftext|><|endoftext|>",
    "text<|endoftext|>more text",
    "<|im_start|>",
    "<|im_end|>",
    "<|im_start|><|im_end|>",
    "<|im_start|>assistant\n",
    "<|im_start",
    "<|im_",
    "im_start|>",
    "<|endoftext",
    "<|im_start|",
    "<<|im_end|>>",
    "<||>",
    "<|>",
    "< |im_start| >",
    "<|IM_START|>",
    " <|im_start|> spaced <|im_end|> ",
    "\n<|im_end|>\n",
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    "<tool_call></tool_call>",
    "<tool_call",
    "<|fim_prefix|>def add(a, b):\n<|fim_suffix|>\n    return c\n<|fim_middle|>",
    "<|repo_name|>plinth\n<|file_sep|>main.swift\nprint(1)",
    "<|fim_pad|><|object_ref_start|>x<|object_ref_end|><|box_start|>(1,2)<|box_end|>",
    "<|vision_start|><|image_pad|><|vision_end|>",
    "[PAD151665][PAD151700]",
    "<repo_name>plinth<file_sep>README.md<filename>a.py<gh_stars>10",
    "<reponame>x<issue_start>bug<issue_comment>fix<issue_closed>",
    "<jupyter_start><jupyter_text>md<jupyter_code>x=1<jupyter_output>1<empty_output>",
    "<|im_start|>user\n<tool_call>call</tool_call><|im_end|>",
    "<s></s><unk><pad>",
    "<|eot_id|><|begin_of_text|>",
    "<|endoftext|>" * 3 + "tail",
    "<|im_start|>user\n你好 👋<|im_end|>",
    "a<|im_end|>b<|endoftext|>c<tool_call>d",
    # bytes some vocabularies lack (SmolLM2 has no token for 0x04, 0xF1, 0xF2…: llama.cpp drops them)
    "ctrl\x04\x06\x13\x1d chars",
    "plane 5 \U00050000 and private use \U000F0000 \ue000",
    # assigned after Unicode 15.1, so unassigned for llama.cpp's tables
    "new \U0001FAE9 emoji \u1C89 letter \U00010D40 digit",
    "\ufffd replacement \ufeff BOM \u00ad soft hyphen",
]

# very long words and runs
LONG = [
    "a" * 1000,
    "abc" * 400,
    "supercalifragilisticexpialidocious" * 40,
    "Pneumonoultramicroscopicsilicovolcanoconiosis" * 25,
    "🙂" * 300,
    "1234567890" * 120,
    "é" * 600,
    "中" * 500,
    "ab" * 600 + " " + "cd" * 600,
    " " * 1000,
    "\n" * 500,
    "-" * 1200,
    "x" * 3000,
    "lorem ipsum dolor sit amet " * 60,
]


def generated(seed=20240601, count=160):
    rng = random.Random(seed)
    pools = [
        "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789",
        " \t\n\r", "  ", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
        "'sStTmMdD", "éèêëàâäîïôöùûüçñß", "你好世界中文字", "こんにちはカタカナ", "한국어",
        "مرحبا", "नमस्ते", "абвгдежзиклмн", "😀👍🏽❤️🇺🇸👨‍👩‍👧", "\u0301\u0308\u0303",
        "\u00a0\u3000\u2009\u2028\u0085", "٠١٢١٢٣²³½Ⅻ", "<|>", "\u200b\u200d\ufeff",
    ]
    out = []
    for _ in range(count):
        n = rng.randint(1, 40)
        parts = []
        for _ in range(n):
            pool = rng.choice(pools)
            k = rng.randint(1, 4)
            parts.append("".join(rng.choice(pool) for _ in range(k)))
        out.append("".join(parts))
    # word salad from English with random spacing
    words = ("the of and to in is you that it he was for on are as with his they I at be this "
             "have from or one had by word but not what all were we when your can said there use "
             "an each which she do how their if will up other about out many then them these so").split()
    for _ in range(40):
        n = rng.randint(1, 25)
        s = ""
        for _ in range(n):
            w = rng.choice(words)
            if rng.random() < 0.2:
                w = w.capitalize()
            if rng.random() < 0.1:
                w = w.upper()
            sep = rng.choice([" ", " ", " ", "  ", "\n", ", ", ". ", "\t", "'s ", "'t "])
            s += w + sep
        out.append(s)
    return out


def all_strings(name):
    seen, out = set(), []
    for s in HAND + EXTRA.get(name, []) + LONG + generated():
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


# ---------------------------------------------------------------------------------------------

def piece(vocab, token, special):
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, special)
    if n < 0:
        buf = ctypes.create_string_buffer(-n)
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, special)
    return buf.raw[:n]


def detokenize(vocab, ids, special):
    """llama.cpp's own llama_detokenize (llama-cpp-python's detokenize() truncates pieces over 32 bytes)."""
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    size = 64 + 16 * len(ids)
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, size, False, special)
        if n >= 0:
            return buf.raw[:n]
        size = -n + 1


def make(name, path):
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)

    def opt(tok):
        return None if tok < 0 else int(tok)

    cases = []
    strings = all_strings(name)
    for i, s in enumerate(strings):
        data = s.encode("utf-8")
        for special in (False, True):
            ids = llm.tokenize(data, add_bos=False, special=special)
            case = {"text": s, "special": special, "ids": ids}
            detok = detokenize(vocab, ids, special)
            if detok != data:
                case["detok"] = detok.hex()
            cases.append(case)
        if i < 40:
            ids = llm.tokenize(data, add_bos=True, special=True)
            cases.append({"text": s, "special": True, "add_special": True, "ids": ids})

    # piece bytes for a sample of tokens: all non-normal ones, and every 37th
    sample = sorted(set(range(0, n_vocab, PIECE_STRIDE.get(name, 37))) |
                    {t for t in range(n_vocab) if llama_cpp.llama_vocab_get_attr(vocab, t) != llama_cpp.LLAMA_TOKEN_ATTR_NORMAL}
                    | set(range(n_vocab - 5, n_vocab)))
    pieces = [{"id": t, "plain": piece(vocab, t, False).hex(), "special": piece(vocab, t, True).hex()}
              for t in sample]

    eog = [t for t in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, t)]
    control = [t for t in range(n_vocab) if llama_cpp.llama_vocab_is_control(vocab, t)]
    fixture = {
        "model": os.path.basename(path),
        "generator": "Scripts/make_tokenizer_fixtures.py",
        "llama_cpp_python": llama_cpp.__version__,
        "vocabulary_size": n_vocab,
        "bos": opt(llama_cpp.llama_vocab_bos(vocab)),
        "eos": opt(llama_cpp.llama_vocab_eos(vocab)),
        "eot": opt(llama_cpp.llama_vocab_eot(vocab)),
        "pad": opt(llama_cpp.llama_vocab_pad(vocab)),
        "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "add_eos": bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
        "eog": eog,
        "control": control,
        "cases": cases,
        "pieces": pieces,
    }
    os.makedirs(OUT, exist_ok=True)
    out = os.path.join(OUT, f"{name}.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{name}: {len(strings)} strings, {len(cases)} cases, {len(pieces)} pieces, "
          f"{os.path.getsize(out)} bytes -> {out}")


if __name__ == "__main__":
    names = sys.argv[1:] or list(MODELS)
    for n in names:
        make(n, MODELS[n])
