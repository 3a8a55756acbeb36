#!/usr/bin/env python3
"""Makes the tokenizer.json and chat-template fixtures and records what Hugging Face makes of them.

Needs `tokenizers` (0.20+) and `transformers` (5.x, with jinja2); no network, CPU, seconds:

    python3 scripts/make_tokenizer_fixtures.py            # writes in place, prints a summary

Writes (commit all of it):

  tests/fixtures/tokenizer_json/                 Llama-3 style
    tokenizer.json        a byte-level BPE trained here by `tokenizers` on the corpus below:
                          Llama-3's pre-tokenizer (Split with its regex, then ByteLevel without a
                          regex of its own), ignore_merges, Llama-3's special tokens after the
                          vocabulary, TemplateProcessing adding <|begin_of_text|>, ByteLevel decoder
    tokenizer_config.json bos/eos, added_tokens_decoder, Llama-3.1's chat template
    config.json-less:     the tests pair it with a random model
  tests/fixtures/tokenizer_json/qwen/            Qwen2 style
    tokenizer.json        the same corpus, Qwen2's regex (single digits), the NFC normalizer, no BOS,
                          merges rewritten to the older "a b" string form, extra added tokens with
                          lstrip / rstrip / single_word / normalized flags
    tokenizer_config.json
  tests/fixtures/tokenizer_json/reference.json
    per tokenizer ("llama3", "qwen") and per test string:
      ids                 Tokenizer.encode(text, add_special_tokens=False).ids   (`tokenizers`)
      ids_special         Tokenizer.encode(text).ids (post-processor applied)
      hf_ids              transformers: AutoTokenizer.from_pretrained(dir)(text)["input_ids"]
      decoded             Tokenizer.decode(ids, skip_special_tokens=True)
    chat: conversations through the fixture's chat template with apply_chat_template, as text
    and as ids (what `tunableop llm --chat` must produce)
  tests/fixtures/chat_templates/reference.json
    each family template (*.jinja beside it) rendered by transformers' apply_chat_template for
    several conversations, add_generation_prompt on and off; "error" where the template raises

The test strings cover CJK, emoji with skin-tone modifiers and ZWJ sequences, combining marks,
NBSP and other Unicode spaces, tab / CR / LF runs, digits and long digit runs, contractions,
special-token strings inside text, leading and trailing spaces.
"""

import json
import os
import sys

import tokenizers
import transformers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOK_DIR = os.path.join(ROOT, "tests", "fixtures", "tokenizer_json")
CHAT_DIR = os.path.join(ROOT, "tests", "fixtures", "chat_templates")

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                   "<|eom_id|>", "<|python_tag|>"] + [f"<|reserved_special_token_{i}|>" for i in range(4)]
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# Our own training text: short sentences in several scripts, repeated in combinations so that
# frequent words merge. Not any corpus's text.
CORPUS_BASE = [
    "The small robot walks to the market before the rain starts.",
    "A quiet river sings a gentle song while the tea cools down.",
    "Every morning the baker opens the wooden door with great care.",
    "Our old neighbour counts the stars at night, then smiles.",
    "I'm sure you're right: we'll see what they've done, and it's fine.",
    "There are 31415 apples, 27182 pears and 1618 plums in the basket.",
    "Call 555-0100 or write to help@example.com before 2024-07-26.",
    "def tokenize(text):\n    return [word for word in text.split()]\n",
    "if (x > 0) {\n\treturn x * 2;\n} else {\n\treturn -x;\n}\n",
    "Le café est très bon, déjà prêt à côté de la fenêtre.",
    "Über den Brücken fahren große Züge schön langsam.",
    "El niño comió una piña en la mañana de otoño.",
    "Русский текст: мы идём домой по тихой улице.",
    "Ελληνικά: καλημέρα, τι κάνεις σήμερα;",
    "今天天气很好，我们去公园散步。",
    "東京の空は青いです。猫が好きです。",
    "한국어 문장은 이렇게 씁니다.",
    "हिन्दी में एक छोटा वाक्य।",
    "العربية لغة جميلة.",
    "Emoji: 🚀 🌕 👍 😀 🎉 ❤️",
    "Spaces   between    words\tand\ttabs\r\nand new lines\n\n",
]


def corpus():
    lines = []
    for i in range(40):
        for j, s in enumerate(CORPUS_BASE):
            lines.append(s if (i + j) % 3 else s.upper() if j < 5 else s)
    return lines


TEST_STRINGS = [
    "Hello Earthlings!",
    "The small robot walks to the market.",
    "  two leading spaces",
    "trailing spaces   ",
    " one leading and one trailing ",
    "tabs\tand\t\tdouble\t\t\ttabs",
    "CR LF\r\nLF\nLF LF\n\nCR CR\r\rmixed \r\n\r\n \n end",
    "\n\n\nleading newlines",
    "digits 1234567890 and 3.14159 and 2024-07-26",
    "a long digit run 123456789012345678901234567890",
    "contractions: I'm, you're, he'll, they've, it's, we'd, DON'T, I'M, She'S",
    "NBSP\u00a0here and\u00a0\u00a0twice, narrow\u202fnbsp",
    "Le café à côté, naïve façade, Größe, Straße, Ærø",
    "今天天气很好，我们去公园。",
    "日本語のテキスト、カタカナとひらがな",
    "한국어 문장입니다",
    "emoji 🚀🌕 and thumbs 👍🏽👍🏿 with skin tones",
    "ZWJ family 👩\u200d👩\u200d👧\u200d👦 and flag 🏳\ufe0f\u200d🌈 and 🇫🇷",
    "combining e\u0301 vs \u00e9, a\u0308, n\u0303, Zalgo z\u0351\u0352\u0353",
    "Angstrom \u212b vs \u00c5, ligature \ufb01, fullwidth \uff21\uff22\uff23\uff11\uff12",
    "Ελληνικά και Русский текст",
    "العربية والعبرية עברית",
    "हिन्दी देवनागरी",
    "math ∑∫√∞ ≤ ≥ ≠ ±",
    "special <|begin_of_text|> inside text",
    "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>",
    "<|eot_id|><|eot_id|>",
    "almost special <|begin_of_text| and <|eot_id and |>",
    "Qwen specials <|im_start|>user\nhi<|im_end|>\n<|endoftext|>",
    "flags: a <tool_call> b<tool_call>c and [MASK] x   [MASK] and word <w> x<w>y <w>.",
    "code:\n    def f(x):\n        return x**2  # square\n",
    'JSON {"a": [1, 2, {"b": null}], "c": "d"}',
    "URL https://example.com/path?q=1&r=2#frag",
    "mixed case HeLLo WoRLD",
    "punctuation!!! ??? ... --- ___ ***",
    "unicode spaces: ideographic\u3000space, em\u2003space, NEL\u0085here, LS\u2028PS\u2029end",
    "zero\u200bwidth and BOM\ufeffhere",
    "Mongolian\u180evowel separator",
    "x" * 300,
    "a",
    " ",
    "\n",
    "",
]


def train(pattern, normalizer):
    tok = Tokenizer(models.BPE())
    if normalizer:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer)
    return tok


def edit_json(tok, edit):
    """The tokenizer, its JSON changed by `edit` and read back (what a file on disk would be)."""
    j = json.loads(tok.to_str())
    edit(j)
    return Tokenizer.from_str(json.dumps(j))


def make_llama3():
    tok = train(LLAMA3_PATTERN, None)
    tok = edit_json(tok, lambda j: j["model"].__setitem__("ignore_merges", True))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in LLAMA3_SPECIALS])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)]),
    ])
    with open(os.path.join(CHAT_DIR, "llama3.1.jinja"), encoding="utf-8") as f:
        template = f.read()
    config = {
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|eot_id|>",
        "clean_up_tokenization_spaces": False,
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": template,
    }
    return tok, config


def make_qwen():
    tok = train(QWEN2_PATTERN, normalizers.NFC())

    tok = edit_json(tok, lambda j: j["model"].__setitem__("ignore_merges", False))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIALS])
    tok.add_tokens([AddedToken("<tool_call>", special=False, normalized=False)])
    tok.add_special_tokens([AddedToken("[MASK]", special=True, lstrip=True, rstrip=True, normalized=False)])
    tok.add_tokens([AddedToken("<w>", special=False, single_word=True, normalized=True)])
    with open(os.path.join(CHAT_DIR, "qwen2.5.jinja"), encoding="utf-8") as f:
        template = f.read()
    config = {
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "clean_up_tokenization_spaces": False,
        "model_max_length": 32768,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": template,
    }
    return tok, config


def save(tok, config, out, legacy_merges=False):
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "tokenizer.json")
    tok.save(path)
    if legacy_merges:  # the "a b" form tokenizers wrote before 0.20 (it still reads it)
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        j["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
        with open(path, "w", encoding="utf-8") as f:
            json.dump(j, f, indent=2, ensure_ascii=False)
    decoder = {}
    for i, t in sorted(tok.get_added_tokens_decoder().items()):
        decoder[str(i)] = {"content": t.content, "lstrip": t.lstrip, "normalized": t.normalized, "rstrip": t.rstrip,
                           "single_word": t.single_word, "special": t.special}
    config = dict(config)
    config["added_tokens_decoder"] = decoder
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
        f.write("\n")


def ids_of(encoded):
    """apply_chat_template(tokenize=True) gives a list or a BatchEncoding, by version."""
    if hasattr(encoded, "keys") and "input_ids" in encoded:
        encoded = encoded["input_ids"]
    if encoded and isinstance(encoded[0], list):
        encoded = encoded[0]
    return list(encoded)


CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello!"}],
    "system_user": [{"role": "system", "content": "You are a terse assistant."},
                    {"role": "user", "content": "What is 2+2?"}],
    "multi_turn": [{"role": "system", "content": "Answer in one word."},
                   {"role": "user", "content": "Capital of France?"},
                   {"role": "assistant", "content": "Paris."},
                   {"role": "user", "content": "And of Italy?"}],
    "multi_turn_no_system": [{"role": "user", "content": "Hi"},
                             {"role": "assistant", "content": " Hello, how can I help? "},
                             {"role": "user", "content": "Tell me a joke."}],
    "whitespace_unicode": [{"role": "user", "content": "  Grüße 🚀 中文\n\twith\ttabs  \n"}],
    "thinking": [{"role": "user", "content": "Q1"},
                 {"role": "assistant", "content": "<think>\nlet me see\n</think>\n\nA1"},
                 {"role": "user", "content": "Q2"}],
    "two_users": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
    "ends_with_assistant": [{"role": "user", "content": "Say hi"}, {"role": "assistant", "content": "Hi!"}],
}

# Each family template with the special tokens its tokenizer_config.json gives it.
FAMILIES = {
    "llama3": ("llama3.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    "llama3.1": ("llama3.1.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    "mistral-v0.3": ("mistral-v0.3.jinja", "<s>", "</s>"),
    "mistral-nemo": ("mistral-nemo.jinja", "<s>", "</s>"),
    "qwen2.5": ("qwen2.5.jinja", None, "<|im_end|>"),
    "qwen3": ("qwen3.jinja", None, "<|im_end|>"),
    "gemma-2": ("gemma-2.jinja", "<bos>", "<eos>"),
}


def tokenizer_with(tok, bos, eos):
    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError:  # transformers 5 names the class after its backend
        from transformers import TokenizersBackend as PreTrainedTokenizerFast

    kwargs = {"tokenizer_object": tok.__class__.from_str(tok.to_str())}
    if bos:
        kwargs["bos_token"] = bos
    if eos:
        kwargs["eos_token"] = eos
    return PreTrainedTokenizerFast(**kwargs)


def render(hf, conversation, add_generation_prompt, template):
    try:
        text = hf.apply_chat_template(conversation, tokenize=False, add_generation_prompt=add_generation_prompt,
                                      chat_template=template)
        return {"rendered": text}
    except Exception as e:  # noqa: BLE001 - the template's raise_exception is a result here
        return {"error": str(e)}


def main():
    from transformers import AutoTokenizer

    made = {"llama3": make_llama3(), "qwen": make_qwen()}
    merges_forms = {}
    dirs = {"llama3": TOK_DIR, "qwen": os.path.join(TOK_DIR, "qwen")}
    reference = {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__, "tokenizers_cases": {},
                 "chat": []}
    for name, (tok, config) in made.items():
        save(tok, config, dirs[name], legacy_merges=name == "qwen")
        tok = Tokenizer.from_file(os.path.join(dirs[name], "tokenizer.json"))  # exactly the file
        with open(os.path.join(dirs[name], "tokenizer.json"), encoding="utf-8") as f:
            merges_forms[name] = "\"a b\" strings" if isinstance(json.load(f)["model"]["merges"][0], str) else "[a, b] pairs"
        hf = AutoTokenizer.from_pretrained(dirs[name])
        cases = []
        for text in TEST_STRINGS:
            ids = tok.encode(text, add_special_tokens=False).ids
            cases.append({
                "text": text,
                "ids": ids,
                "ids_special": tok.encode(text).ids,
                "hf_ids": list(hf(text)["input_ids"]),
                "decoded": tok.decode(ids, skip_special_tokens=True),
            })
        reference["tokenizers_cases"][name] = {"dir": os.path.relpath(dirs[name], ROOT), "vocab_size": tok.get_vocab_size(),
                                               "cases": cases}
        for conv_name in ("user", "system_user", "multi_turn", "whitespace_unicode"):
            conv = CONVERSATIONS[conv_name]
            text = hf.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)
            ids = ids_of(hf.apply_chat_template(conv, tokenize=True, add_generation_prompt=True))
            reference["chat"].append({"tokenizer": name, "conversation": conv_name, "messages": conv, "text": text,
                                      "ids": ids})
    with open(os.path.join(TOK_DIR, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(reference, f, indent=1, ensure_ascii=False)
        f.write("\n")

    base = made["llama3"][0]
    chat = {"transformers": transformers.__version__, "families": {}, "cases": []}
    for family, (file, bos, eos) in FAMILIES.items():
        with open(os.path.join(CHAT_DIR, file), encoding="utf-8") as f:
            template = f.read()
        chat["families"][family] = {"file": file, "bos_token": bos, "eos_token": eos}
        hf = tokenizer_with(base, bos, eos)
        for conv_name, conv in CONVERSATIONS.items():
            for gen in (True, False):
                case = {"family": family, "conversation": conv_name, "messages": conv, "add_generation_prompt": gen}
                case.update(render(hf, conv, gen, template))
                chat["cases"].append(case)
    with open(os.path.join(CHAT_DIR, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(chat, f, indent=1, ensure_ascii=False)
        f.write("\n")

    print(f"make_tokenizer_fixtures: tokenizers {tokenizers.__version__}, transformers {transformers.__version__}")
    for name, r in reference["tokenizers_cases"].items():
        agree = sum(c["ids_special"] == c["hf_ids"] for c in r["cases"])
        print(f"  {r['dir']}: vocab {r['vocab_size']}, merges as {merges_forms[name]}, {len(r['cases'])} strings "
              f"(tokenizers and transformers agree on {agree})")
    print(f"  chat through the fixtures' templates: {len(reference['chat'])} conversations as text and ids")
    errors = sum("error" in c for c in chat["cases"])
    print(f"  {os.path.relpath(CHAT_DIR, ROOT)}/reference.json: {len(chat['cases'])} renders of "
          f"{len(FAMILIES)} family templates ({errors} raise, as the templates mean to)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
