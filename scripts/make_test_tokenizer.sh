#!/usr/bin/env bash
# Trains the tiny SentencePiece model the text tests use and records what SentencePiece's own
# tools make of a few test strings:
#
#     scripts/make_test_tokenizer.sh [OUT_DIR]     # default tests/fixtures/tokenizer
#
# Needs the Debian package `sentencepiece` (spm_train, spm_encode). Writes:
#   tokenizer.model     BPE, 512 pieces (<unk>=0, <s>=1, </s>=2, 256 byte pieces, the rest characters and merges),
#                       byte fallback, identity normalisation, dummy prefix, digits split:
#                       the settings of Llama-2's tokenizer, at a size a test model can match
#   spm_encode.tsv      text <TAB> ids, one line per test string, from `spm_encode --output_format=id`
#                       (no BOS: spm_encode adds none)
# The model is committed: the tests compare with these files instead of training at test time,
# so they do not depend on the trainer's determinism across versions.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-tests/fixtures/tokenizer}
for tool in spm_train spm_encode; do
  command -v "$tool" >/dev/null || { echo "make_test_tokenizer: $tool not found (apt install sentencepiece)" >&2; exit 1; }
done
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The training text: our own sentences, repeated in a few combinations so that common words get
# merged pieces. A handful of accented Latin and CJK characters are seen (so they get pieces);
# anything unseen (other CJK, emoji) goes through byte fallback.
{
  subjects=("The small robot" "A quiet river" "Every morning the baker" "Our old neighbour" "The tired student"
            "A bright lantern" "The patient teacher" "Two curious cats")
  verbs=("walks to the market" "sings a gentle song" "reads the letter again" "counts the stars at night"
         "opens the wooden door" "waits for the train" "paints the garden wall" "writes in a green notebook")
  ends=("before the rain starts." "and then smiles." "while the tea cools down." "with great care."
        "for the third time today." "as the bells ring." "until the lights go out." "near the harbour.")
  for s in "${subjects[@]}"; do
    for i in "${!verbs[@]}"; do
      echo "$s ${verbs[$i]} ${ends[$(( (i + ${#s}) % ${#ends[@]} ))]}"
    done
  done
  for n in 3 14 159 2653 58979; do echo "There are $n apples, $((n * 2)) pears and $((n + 7)) plums in the basket."; done
  for _ in 1 2 3; do
    echo "Le café est très bon, déjà prêt à côté de la fenêtre."
    echo "Über den Brücken fahren große Züge schön langsam."
    echo "El niño comió una piña en la mañana."
    echo "今天天气很好，我们去公园。"
    echo "東京の空は青いです。"
  done
  echo "Hello Earthlings! Hello again, Earth."
} >"$work/corpus.txt"

spm_train --input="$work/corpus.txt" --model_prefix="$work/tok" --vocab_size=512 --model_type=bpe \
  --byte_fallback=true --character_coverage=1.0 --split_digits=true --normalization_rule_name=identity \
  --remove_extra_whitespaces=false --add_dummy_prefix=true --allow_whitespace_only_pieces=true \
  --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 --num_threads=1 --input_sentence_size=0 \
  --shuffle_input_sentence=false --minloglevel=2 >"$work/train.log" 2>&1 ||
  { cat "$work/train.log" >&2; exit 1; }
cp "$work/tok.model" "$out/tokenizer.model"

# Test strings: ASCII, spaces (leading, doubled, trailing), digits, accents, seen and unseen CJK,
# emoji (4-byte UTF-8, byte fallback), a combining accent. No tabs or newlines (one per line).
cat >"$work/strings.txt" <<'EOF'
Hello Earthlings!
The small robot walks to the market.
  two leading spaces, then  two  inside and one after 
There are 31415 apples.
Le café est très bon à côté.
Über große Züge: schön!
今天天气很好
猫が好きです
Rocket 🚀 to the 🌕, then home 🏠.
e͂ with a combining tilde, ﬁ ligature
a
EOF
spm_encode --model="$out/tokenizer.model" --output_format=id <"$work/strings.txt" >"$work/ids.txt"
paste "$work/strings.txt" "$work/ids.txt" >"$out/spm_encode.tsv"
echo "make_test_tokenizer: wrote $out/tokenizer.model ($(wc -c <"$out/tokenizer.model") bytes) and $out/spm_encode.tsv"
