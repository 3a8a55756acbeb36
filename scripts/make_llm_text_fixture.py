#!/usr/bin/env python3
"""Builds the Hugging Face text fixture for tests/llm/text/text_session_test.cc.

Needs torch, transformers (5.x; 4.4x works) and sentencepiece; no network; CPU, fp32, seconds:

    python3 scripts/make_llm_text_fixture.py --out tests/fixtures/llm

Writes <out>/llama_spm/:

    config.json, generation_config.json, model.safetensors   a tiny random Llama (vocab 512, the
                           test tokenizer's; bf16 storage), as save_pretrained writes it
    tokenizer.model        a copy of tests/fixtures/tokenizer/tokenizer.model
                           (scripts/make_test_tokenizer.sh made it with spm_train)
    tokenizer_config.json  Llama-2's settings: add BOS <s>, EOS </s>
    reference_text.json    per prompt:
        prompt             the text
        prompt_ids         BOS + SentencePiece's ids (sentencepiece Python module)
        hf_tokenizer_ids   what transformers' AutoTokenizer gives, when it loads offline
        greedy_ids         16 greedy tokens, each from a full forward pass in fp32 (no cache)
        greedy_text        sentencepiece's decode(greedy_ids)
        continuation_text  decode(prompt_ids + greedy_ids) minus decode(prompt_ids): the text
                           the engine prints after the prompt (leading space kept)
        min_margin         smallest top-1 minus top-2 logit gap over the greedy steps

Seeds are tried until every prompt's greedy steps have clear margins, as in
make_llm_fixtures.py, whose helpers this script reuses.
"""

import argparse
import json
import os
import shutil
import sys

import sentencepiece as spm
import torch
import transformers
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_llm_fixtures import MIN_MARGIN_ABS, MIN_MARGIN_REL, dir_bytes, randomize, reference, rope_kwargs  # noqa: E402

NAME = "llama_spm"
MAX_BYTES = 400 * 1024
PROMPTS = [
    "Hello Earthlings!",
    "The small robot walks to the market.",
    "Le café est très bon",
    "今天天气很好",
    "Rocket 🚀 to the moon",
]
TOKENIZER_CONFIG = {
    "tokenizer_class": "LlamaTokenizer",
    "add_bos_token": True,
    "add_eos_token": False,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "legacy": False,
    "model_max_length": 128,
}


def hf_tokenizer(out):
    """transformers' own tokenizer for the directory, or None when it cannot load offline."""
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(out)
    except Exception as e:  # noqa: BLE001 - any failure only means "no second opinion"
        print(f"note: transformers' tokenizer did not load ({type(e).__name__}: {e}); prompt ids from sentencepiece only")
        return None


def build(out_root, tokenizer_model):
    sp = spm.SentencePieceProcessor(model_file=tokenizer_model)
    vocab = sp.get_piece_size()
    bos, eos = sp.bos_id(), sp.eos_id()
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-5, hidden_act="silu",
        tie_word_embeddings=False, attention_bias=False, bos_token_id=bos, eos_token_id=eos,
        **rope_kwargs(LlamaConfig, 10000.0))
    out = os.path.join(out_root, NAME)
    prompts = [[bos] + sp.encode(p) for p in PROMPTS]
    for resid_scale, seed in [(r, s) for r in (1.0, 2.0, 4.0) for s in range(1, 80)]:
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).to(torch.float32).eval()
        randomize(model, False, seed, resid_scale)
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.makedirs(out)
        model.to(torch.bfloat16).save_pretrained(out)
        shutil.copyfile(tokenizer_model, os.path.join(out, "tokenizer.model"))
        with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
            json.dump(TOKENIZER_CONFIG, f, indent=1)
            f.write("\n")
        try:
            loaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager")
        except TypeError:  # transformers 4.x
            loaded = AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32, attn_implementation="eager")
        loaded = loaded.to(torch.float32).eval()
        cases, ok = [], True
        for text, ids in zip(PROMPTS, prompts):
            _, greedy, margins = reference(loaded, ids)
            worst_abs = min(m[0] for m in margins)
            worst_rel = min(m[1] for m in margins)
            if worst_abs < MIN_MARGIN_ABS or worst_rel < MIN_MARGIN_REL or len(set(greedy)) < 3:
                ok = False
                break
            prompt_text = sp.decode(ids)
            full_text = sp.decode(ids + greedy)
            assert full_text.startswith(prompt_text), (prompt_text, full_text)
            cases.append({
                "prompt": text,
                "prompt_ids": ids,
                "greedy_ids": greedy,
                "greedy_text": sp.decode(greedy),
                "continuation_text": full_text[len(prompt_text):],
                "min_margin": worst_abs,
                "min_relative_margin": worst_rel,
            })
        if not ok:
            continue
        tok = hf_tokenizer(out)
        if tok is not None:
            for c in cases:
                c["hf_tokenizer_ids"] = tok(c["prompt"])["input_ids"]
                if c["hf_tokenizer_ids"] != c["prompt_ids"]:
                    print(f"warning: transformers and sentencepiece disagree on {c['prompt']!r}: "
                          f"{c['hf_tokenizer_ids']} vs {c['prompt_ids']}")
        ref = {
            "model": NAME,
            "transformers_version": transformers.__version__,
            "torch_version": torch.__version__,
            "sentencepiece_version": spm.__version__,
            "seed": seed,
            "residual_scale": resid_scale,
            "storage_dtype": "bfloat16",
            "bos_token_id": bos,
            "eos_token_id": eos,
            "cases": cases,
        }
        with open(os.path.join(out, "reference_text.json"), "w", encoding="utf-8") as f:
            json.dump(ref, f, indent=1, ensure_ascii=False)
            f.write("\n")
        size = dir_bytes(out)
        if size > MAX_BYTES:
            sys.exit(f"{out}: {size} bytes, over the {MAX_BYTES} byte fixture limit")
        worst = min(c["min_margin"] for c in cases)
        print(f"{NAME}: seed {seed}, residual scale {resid_scale}, min margin {worst:.3f}, {size} bytes: "
              f"{sorted(os.listdir(out))}")
        for c in cases:
            print(f"  {c['prompt']!r} -> {c['continuation_text']!r}")
        return
    sys.exit(f"{NAME}: no seed gave clear greedy margins for every prompt")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures/llm", help="fixture root (the model goes to <out>/llama_spm)")
    ap.add_argument("--tokenizer", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                                        "fixtures", "tokenizer", "tokenizer.model"),
                    help="the SentencePiece model (default: the committed test tokenizer)")
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    build(args.out, args.tokenizer)


if __name__ == "__main__":
    main()
