#!/usr/bin/env bash
# Makes a Llama-3.2-1B directory for `--load-format dummy` with the real Llama 3.2 tokenizer and
# chat template (files from scripts/fetch-tokenizers) and prints its path.
# The tokenizer package's Llama 3.2 tokenizer has one added token past the 128,256 rows of the
# embedding: the random model gets that row too (0.0003% more weights). Its tokenizer_config.json
# has no chat template: Llama 3.2's (the HF-parity fixture) is added.
#   MODEL=$(tests/gpu/dummy_llama.sh)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MODEL="$(mktemp -d)/llama-3.2-1b"; mkdir -p "$MODEL"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["vocab_size"]=128257; json.dump(c,open(sys.argv[2],"w"))' \
  "$ROOT/tests/gpu/configs/llama-3.2-1b.json" "$MODEL/config.json"
cp "$ROOT/models/tokenizers/llama3.2/tokenizer.json" "$MODEL/"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["chat_template"]=open(sys.argv[2]).read(); json.dump(c,open(sys.argv[3],"w"))' \
  "$ROOT/models/tokenizers/llama3.2/tokenizer_config.json" "$ROOT/tests/fixtures/chat_templates/llama3.2.jinja" \
  "$MODEL/tokenizer_config.json"
echo "$MODEL"
