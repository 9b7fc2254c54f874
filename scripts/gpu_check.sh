#!/usr/bin/env bash
# Check and time the Triton FlashAttention kernels (chapter 16) on a GPU machine (nbs/appendix_gpu_check.ipynb).
# Installs nothing and needs no internet: it runs `python -m transformer_lit.gpu_check check` from this checkout
# with the Python that already has torch and triton.
#
#   scripts/gpu_check.sh                      # on the GPU: environment, correctness (bfloat16 first), compile report,
#                                             # tile tuning, timing; each phase has its own deadline; the table last
#   scripts/gpu_check.sh --dry-run            # anywhere: the same code in the Triton interpreter on tiny CPU sizes
#   scripts/gpu_check.sh --budget 300 --phase correctness=90 --no-tune
#   scripts/gpu_check.sh show DIR/flash_triton.json   # print a saved report again
#
# Output folder: $OUT if set (what the lent GPU machine brings back), else gpu_check_out/. Into it go, rewritten
# after every case, row and phase (a run cut off keeps what it measured):
#   flash_triton.json  the report        -> copy to nbs/gpu_results/, then re-execute nbs/appendix_gpu_check.ipynb
#   flash_triton.md    the same, as markdown with the timing table last
#   gpu_tuning.json    the package's file plus this GPU's re-checked tiles and triton preferences
#                                        -> copy over transformer_lit/gpu_tuning.json and commit it
#   gpu_check.log      everything printed
#
# Environment: PYTHON (default: .venv/bin/python if present, else python3); CHECK_TIMEOUT (default 450 s, at most
# 500 except in a dry run: the check's own budget is 330 s, and the machine's 600 s ceiling must leave room to bring the files back).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"   # use this checkout without installing it
export PYTHONUNBUFFERED=1                             # each line appears as it is logged, also through a pipe
if [ "${1:-}" = "show" ]; then exec "$PY" -m transformer_lit.gpu_check "$@"; fi
dry=0
for a in "$@"; do
  if [ "$a" = "--dry-run" ]; then
    dry=1
    # the interpreter must be chosen before triton is imported; hide GPUs so the CPU path runs
    export TRITON_INTERPRET=1 CUDA_VISIBLE_DEVICES=""
  fi
done
limit="${CHECK_TIMEOUT:-450}"
# on the lent GPU (600 s per command) the limit must leave time to bring $OUT back; a dry run on a busy CPU may need more
if [ "$dry" = 0 ] && [ "$limit" -gt 500 ]; then echo "CHECK_TIMEOUT=$limit must be at most 500 seconds" >&2; exit 2; fi
out="${OUT:-gpu_check_out}"
mkdir -p "$out"
echo "gpu_check: writing to $out (time limit ${limit} s)" | tee "$out/gpu_check.log"
# TERM at the limit, KILL 10 s later; the reports in $out were written as the check went
set +e
timeout -k 10 "$limit" "$PY" -m transformer_lit.gpu_check check --out "$out" "$@" 2>&1 | tee -a "$out/gpu_check.log"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "gpu_check: stopped after ${limit} s; $out keeps what was measured" | tee -a "$out/gpu_check.log"; fi
exit "$rc"
