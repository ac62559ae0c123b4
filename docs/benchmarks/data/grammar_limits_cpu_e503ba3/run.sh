#!/usr/bin/env bash
# Large and ambiguous grammars through the CLI: wall time of a 4-token generation.
B=${1:-/work/main/build/bin/lite-llama}; M=/work/main/models/SmolLM2-135M-Instruct.Q4_1.gguf
for n in 4000 15000 40000; do
  s=$(date +%s.%N); $B generate -m $M -p x -n 4 --temp 0 -t 1 -q --grammar /tmp/gm/alt$n.gbnf > /tmp/gm/out$n.txt 2>&1; rc=$?
  e=$(date +%s.%N); echo "alternatives $n: rc=$rc $(echo "$e - $s" | bc) s $(head -c 120 /tmp/gm/out$n.txt | tr '\n' ' ')"
done
for rx in '(.{0,99}){0,99}' '(.{0,500}){0,500}' '(.{0,999}){0,999}'; do
  s=$(date +%s.%N); $B generate -m $M --chat -p x -n 12 --temp 0 -t 1 -q --regex "$rx" --json > /tmp/gm/rx.txt 2>&1; rc=$?
  e=$(date +%s.%N); echo "regex $rx: rc=$rc $(echo "$e - $s" | bc) s $(head -c 160 /tmp/gm/rx.txt | tr '\n' ' ')"
done
