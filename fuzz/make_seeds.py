#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/<target>/ (committed; rerun after changing formats).

Small, valid-ish inputs of every shape each parser knows, so that fuzzing starts from the
interesting paths instead of discovering the formats byte by byte."""
import json
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


OURS = ("Validator,TUNABLEOP_VERSION,0.1.0\nValidator,CPU,fuzz cpu avx2 2 cores\n"
        "GemmTunableOp_float_NN,nn_1024_512_2048,Gemm_Openblas_t2,0.0653662\n"
        "GemmStridedBatchedTunableOp_BFloat16_TN,tn_64_32_128_B_4,Default,1.5e-05\n")
put("results_file", "ours.csv", OURS)
put("results_file", "bom.csv", "\ufeff" + OURS)
put("results_file", "crlf.csv", OURS.replace("\n", "\r\n"))
put("results_file", "blank.csv", "\n  \n\t\n")
put("results_file", "pytorch.csv",
    "Validator,PT_VERSION,2.5.0\nValidator,ROCBLAS_VERSION,4.2\nValidator,GCN_ARCH_NAME,gfx942\n"
    "GemmTunableOp_float_NT,nt_25088_4096_64,Gemm_Rocblas_1074,0.135\n")
put("results_file", "malformed.csv",
    OURS + "Validator,ONLY_TWO\nGemmTunableOp_float_NN,nn_1_1_1,Default,-1\nop,params,sol,nan\n,,,\n"
    "Validator,CPU,another cpu\nGemmTunableOp_float_NN,nn_1_1_1,Default,1e308\ntruncated,li")
put("results_file", "stats.csv",
    "GemmTunableOp_float_NN,nn_8_8_8,Default,0.1,0.2,0.3,0.01,12,4.5\n")
put("results_file", "other_env.csv", OURS.replace("fuzz cpu", "other cpu"))

UNTUNED = ["GemmTunableOp_float_NN,nn_1024_512_2048", "GemmTunableOp_float_TN,tn_4096_8_4096",
           "GemmTunableOp_Half_NT,nt_7_9_11_ld_8_10_12",
           "GemmStridedBatchedTunableOp_double_NN,nn_4_4_4_B_3",
           "GemmStridedBatchedTunableOp_BFloat16_TT,tt_5_6_7_ld_7_6_5_B_2_S_100_100_100",
           "GemmTunableOp_float_tf32_NN,nn_64_64_64",
           "GemmAndBiasTunableOp_float_TN,tn_16_8_32_act_1",
           "GemmAndBiasTunableOp_BFloat16_NN,nn_16_8_32_ld_20_40_16_act_2",
           "GemmStridedBatchedTunableOp_float_NN,nn_4_4_4_B_288230376151711744",
           "GemmTunableOp_float_NN,nn_64_64_64_ld_64_64_4611686018427387904",
           "FusedLinearTunableOp_BFloat16,out_2560_tokens_1_in_2048_input_1_eps_1e-06_output_0",
           "FusedLinearTunableOp_float,out_16_tokens_4_in_64_input_0_eps_0_output_3",
           "AttentionTunableOp_BFloat16_causal,b1_q512_k512_h32_kv32_d128",
           "AttentionTunableOp_float_causal,b2_q1_k4096_h8_kv2_d64_p64_vk",
           "AttentionTunableOp_Half_full,b1_q16_k64_h4_kv1_d256_ms128_qs2048",
           "AttentionTunableOp_BFloat16_causal,b1_q1_k8192_h16_kv8_d256_vk_w4096_cap50",
           "AttentionTunableOp_float_causal,b2_q7_k7_h4_kv2_d64_sc0.0833333358168602_cap2.5",
           "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN,tn_64_12288_2048_ld_2048_2048_64_rw_1_bias_None",
           "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e5m2_float_NT,nt_7_5_9_ld_9_13_8_rw_0_bias_BFloat16",
           "ScaledGemmTunableOp_Float8_e5m2_Float8_e5m2_Half_TT,tt_3_3_3_ld_3_3_3_rw_1_bias_Float"]
put("untuned_signature", "untuned.csv", "\n".join(UNTUNED) + "\n")
for i, line in enumerate(UNTUNED):
    put("untuned_signature", "line%d.csv" % i, line + "\n")
put("untuned_signature", "results_lines.csv", OURS)
put("untuned_signature", "bom_blank.csv", "\ufeff\n\nGemmTunableOp_float_NN,nn_1_2_3\n bad line \n")


def safetensors(tensors):
    """tensors: list of (name, dtype, shape, element size); data is deterministic bytes."""
    header, data = {}, b""
    for name, dtype, shape, es in tensors:
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n * es]}
        data += bytes((i * 37 + len(data)) % 251 for i in range(n * es))
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


CLASSES = {"llama": "LlamaForCausalLM", "gemma": "GemmaForCausalLM", "qwen2": "Qwen2ForCausalLM",
           "qwen3": "Qwen3ForCausalLM", "gemma2": "Gemma2ForCausalLM", "mistral": "MistralForCausalLM"}


def model(arch, vocab, hidden, inter, layers, heads, kv, head_dim, tied, dtype="F32", es=4, extra=None):
    cfg = {"architectures": [CLASSES[arch]],
           "model_type": arch, "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": inter,
           "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv,
           "head_dim": head_dim, "max_position_embeddings": 32, "rms_norm_eps": 1e-6,
           "tie_word_embeddings": tied}
    cfg.update(extra or {})
    q, k = heads * head_dim, kv * head_dim
    t = [("model.embed_tokens.weight", dtype, [vocab, hidden], es)]
    for i in range(layers):
        p = "model.layers.%d." % i
        bias = arch == "qwen2"
        t += [(p + "input_layernorm.weight", dtype, [hidden], es),
              (p + "self_attn.q_proj.weight", dtype, [q, hidden], es)]
        t += [(p + "self_attn.q_proj.bias", dtype, [q], es)] if bias else []
        t += [(p + "self_attn.k_proj.weight", dtype, [k, hidden], es)]
        t += [(p + "self_attn.k_proj.bias", dtype, [k], es)] if bias else []
        t += [(p + "self_attn.v_proj.weight", dtype, [k, hidden], es)]
        t += [(p + "self_attn.v_proj.bias", dtype, [k], es)] if bias else []
        t += [(p + "self_attn.o_proj.weight", dtype, [hidden, q], es)]
        if arch == "qwen3":
            t += [(p + "self_attn.q_norm.weight", dtype, [head_dim], es),
                  (p + "self_attn.k_norm.weight", dtype, [head_dim], es)]
        t += [(p + "post_attention_layernorm.weight", dtype, [hidden], es)]
        t += [(p + "pre_feedforward_layernorm.weight", dtype, [hidden], es)] if arch == "gemma2" else []
        t += [(p + "mlp.gate_proj.weight", dtype, [inter, hidden], es),
              (p + "mlp.up_proj.weight", dtype, [inter, hidden], es),
              (p + "mlp.down_proj.weight", dtype, [hidden, inter], es)]
        t += [(p + "post_feedforward_layernorm.weight", dtype, [hidden], es)] if arch == "gemma2" else []
    t.append(("model.norm.weight", dtype, [hidden], es))
    if not tied:
        t.append(("lm_head.weight", dtype, [vocab, hidden], es))
    c = json.dumps(cfg).encode()
    return struct.pack("<H", len(c)) + c + safetensors(t)


put("model_loader", "llama.bin", model("llama", 16, 8, 12, 1, 2, 1, 4, False))
put("model_loader", "gemma_bf16.bin", model("gemma", 12, 8, 10, 2, 2, 1, 4, True, "BF16", 2))
put("model_loader", "llama_f16_2layers.bin", model("llama", 10, 4, 6, 2, 1, 1, 4, False, "F16", 2))
# The current families (issue 28): biases, head norms, post-norms, windows, softcaps, RoPE scaling.
put("model_loader", "qwen2_yarn.bin", model("qwen2", 16, 8, 12, 1, 2, 1, 4, True, extra={
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8},
    "use_sliding_window": True, "sliding_window": 4, "max_window_layers": 0}))
put("model_loader", "qwen3.bin", model("qwen3", 16, 8, 12, 1, 2, 1, 6, False))
put("model_loader", "gemma2.bin", model("gemma2", 12, 8, 10, 2, 2, 1, 4, True, "BF16", 2, extra={
    "attn_logit_softcapping": 50.0, "final_logit_softcapping": None, "query_pre_attn_scalar": 6,
    "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]}))
put("model_loader", "llama3_mistral.bin", model("llama", 16, 8, 12, 1, 2, 1, 4, False, extra={
    "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                        "high_freq_factor": 4.0, "original_max_position_embeddings": 8}}))
put("model_loader", "config_only.bin", struct.pack("<H", 60) + b'{"model_type":"llama","vocab_size":1000000000}' +
    b" " * 14)
put("model_loader", "overlap.bin", struct.pack("<H", 2) + b"{}" + safetensors([("a", "F32", [4], 4)])[:-16] +
    b"\0" * 16)

rng = random.Random(9)
for i in range(12):
    put("gemm_params", "random%02d.bin" % i, bytes(rng.randrange(256) for _ in range(rng.choice([24, 48, 96]))))

# chat_template: 2 bytes length, the template, then NUL-separated messages (first byte: role).
def chat(template, messages):
    t = template.encode()
    assert len(t) < 65536
    return struct.pack("<H", len(t)) + t + b"\0".join(messages)


CONVERSATION = [b"\x00You are terse.", b"\x01Hi \xe4\xbd\xa0\xe5\xa5\xbd {{ x }}", b"\x02Hello.", b"\x01More?"]
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "chat_templates")
for name in sorted(os.listdir(FIXTURES)):
    if name.endswith(".jinja"):
        with open(os.path.join(FIXTURES, name)) as f:
            put("chat_template", name.replace(".jinja", ".bin"), chat(f.read(), CONVERSATION))
put("chat_template", "loops.bin", chat(
    "{%- for m in messages if m.role != 'system' -%}{{ loop.index }}:{{ m.content|trim|upper }}"
    "{%- if not loop.last %}|{% endif %}{%- endfor -%}{% set ns = namespace(n=0) %}"
    "{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"
    "{{ messages|map(attribute='role')|join(',') }}{{ (messages|last).content[1:4] }}"
    "{{ {'a': [1, 2.5, none]}|tojson }}{% if add_generation_prompt %}<bot>{% endif %}",
    CONVERSATION))
put("chat_template", "error.bin", chat("{{ raise_exception('no ' ~ messages[0].role) }}", CONVERSATION[:1]))


# tokenizer_json: 2 bytes length, the file, then the text. A byte-level BPE as small as it gets:
# the 256 byte characters, a few merges, two special tokens, Llama-3's split and BOS.
def byte_char(b):
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    if b in printable:
        return chr(b)
    return chr(256 + sorted(set(range(256)) - set(printable)).index(b))


def tokenizer(merges, special=("<|begin_of_text|>", "<|eot_id|>"), bos=True):
    vocab = {byte_char(b): b for b in range(256)}
    enc = lambda s: "".join(byte_char(b) for b in s.encode())
    listed = []
    for a, b in merges:
        vocab[enc(a) + enc(b)] = len(vocab)
        listed.append([enc(a), enc(b)])
    added = [{"id": len(vocab) + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(special)]
    pattern = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
    post = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
    if bos:
        post = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": special[0], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [], "special_tokens": {special[0]: {"id": special[0], "ids": [added[0]["id"]], "tokens": [special[0]]}}}
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": listed}}, ensure_ascii=False).encode()


def tok_seed(file, text):
    assert len(file) < 65536
    return struct.pack("<H", len(file)) + file + text.encode()


MERGES = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (" ", "t"), (" t", "he"), ("1", "2"), ("12", "3"),
          ("'", "m"), ("\u4f60", "\u597d")]
put("tokenizer_json", "tiny.bin", tok_seed(tokenizer(MERGES), "hello the 12345 I'm <|eot_id|>\u4f60\u597d \U0001F44D\U0001F3FD e\u0301\u00a0\t\r\n\n x"))
put("tokenizer_json", "no_bos.bin", tok_seed(tokenizer(MERGES[:4], bos=False), "hellohello  <|begin_of_text|>"))
put("tokenizer_json", "no_merges.bin", tok_seed(tokenizer([]), "abc"))

# openai_request: request bodies of both endpoints.
for i, body in enumerate([
        {"model": "m", "prompt": "Hello", "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "top_k": 40,
         "seed": 3, "stop": ["\n", "END"], "stream": True, "stream_options": {"include_usage": True}},
        {"prompt": [1, 2, 3], "ignore_eos": True, "return_token_ids": True, "stop_token_ids": [2], "n": 1},
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
         "max_completion_tokens": 5, "temperature": 0},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
         "stop": "x", "include_stop_str_in_output": True, "logit_bias": {}},
        {"prompt": "x", "n": 2, "best_of": 3, "logprobs": 1, "suffix": "y"}]):
    put("openai_request", "body%d.json" % i, json.dumps(body))
put("openai_request", "deep.json", "[" * 64 + "]" * 64)
put("openai_request", "not_object.json", '"just a string"')

# model_text: tokenizer_config.json, generation_config.json, tokenizer.json (each 2-byte-length
# prefixed; empty = absent), then a text.
def parts(*files):
    out = b""
    for f in files[:-1]:
        f = f if isinstance(f, bytes) else f.encode()
        assert len(f) < 65536
        out += struct.pack("<H", len(f)) + f
    return out + files[-1].encode()


CONFIG = json.dumps({
    "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "add_bos_token": True,
    "chat_template": "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}<|eot_id|>{% endfor %}"
                     "{% if add_generation_prompt %}<|assistant|>{% endif %}",
    "added_tokens_decoder": {"266": {"content": "<|begin_of_text|>", "special": True},
                             "267": {"content": "<|eot_id|>", "special": True}}})
GENERATION = json.dumps({"bos_token_id": 266, "eos_token_id": [267, 266]})
TINY = tokenizer(MERGES)
put("model_text", "all.bin", parts(CONFIG, GENERATION, TINY, "hello the 123 <|eot_id|> \u4f60\u597d"))
put("model_text", "tokenizer_only.bin", parts("", "", TINY, "I'm here"))
put("model_text", "template_list.bin", parts(json.dumps({"chat_template": [
    {"name": "default", "template": "{{ messages[0].content }}"}, {"name": "tool_use", "template": "x"}]}),
    "", TINY, "hi"))
put("model_text", "no_tokenizer.bin", parts(CONFIG, GENERATION, "", "text"))
