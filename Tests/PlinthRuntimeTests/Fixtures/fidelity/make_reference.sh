#!/usr/bin/env bash
# llama.cpp's outputs that FidelityCLITests holds Plinth to, on the default model:
#   - sha256 of llama-quantize's F32 dequantization of SmolLM2-135M-Instruct.Q4_1.gguf, of
#     llama-quantize --pure of that F32 file to each type plinth quantize writes (the k-quants by
#     their _S names), and of llama-quantize's k-quant mixes of it (no --pure);
#   - llama-perplexity's PPL of the F32 file on GPL-3 (this folder's copy of Debian's
#     /usr/share/common-licenses/GPL-3) with -c 128 --chunks 4, the sha256 of its
#     --kl-divergence-base file's header (context, vocabulary, chunks, tokens), and its KLD and
#     same-top of the Q4_1 file against that base (for reference; the test's thresholds are set
#     from both engines' values).
# Usage: make_reference.sh LLAMA_BIN_DIR MODEL_Q4_1 > llama_reference.json
set -euo pipefail
bin="$1"; model="$2"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
"$bin/llama-quantize" --allow-requantize "$model" "$work/f32.gguf" F32 >/dev/null 2>&1
printf '{\n "f32_sha256": "%s",\n "pure_sha256": {' "$(sha256sum "$work/f32.gguf" | cut -c1-64)"
sep=""
for t in Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 F16 BF16 Q2_K Q3_K_S Q4_K_S Q5_K_S Q6_K; do
    "$bin/llama-quantize" --pure "$work/f32.gguf" "$work/$t.gguf" "$t" >/dev/null 2>&1
    printf '%s\n  "%s": "%s"' "$sep" "$t" "$(sha256sum "$work/$t.gguf" | cut -c1-64)"; sep=","
    rm "$work/$t.gguf"
done
printf '\n },\n "mix_sha256": {'
sep=""
for t in Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K; do
    "$bin/llama-quantize" "$work/f32.gguf" "$work/$t.gguf" "$t" >/dev/null 2>&1
    printf '%s\n  "%s": "%s"' "$sep" "$t" "$(sha256sum "$work/$t.gguf" | cut -c1-64)"; sep=","
    rm "$work/$t.gguf"
done
ppl=$("$bin/llama-perplexity" -m "$work/f32.gguf" -f "$here/GPL-3" -c 128 --chunks 4 -t 2 --kl-divergence-base "$work/base.kld" 2>&1 \
      | sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p')
header=$(head -c $((20 + 4 * 128 * 4)) "$work/base.kld" | sha256sum | cut -c1-64)
kld=$("$bin/llama-perplexity" -m "$model" -t 2 --kl-divergence-base "$work/base.kld" --kl-divergence 2>&1)
mean=$(echo "$kld" | sed -n 's/^Mean    KLD: *\([0-9.]*\).*/\1/p')
top=$(echo "$kld" | sed -n 's/^Same top p: *\([0-9.]*\).*/\1/p')
printf '\n },\n "perplexity": {"ctx": 128, "chunks": 4, "f32_ppl": %s, "base_header_sha256": "%s", "q4_1_mean_kld": %s, "q4_1_same_top_percent": %s}\n}\n' \
    "$ppl" "$header" "$mean" "$top"
