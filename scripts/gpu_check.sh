#!/usr/bin/env bash
# Check and time the Triton FlashAttention kernels (chapter 16) on a GPU machine (nbs/appendix_gpu_check.ipynb).
# Installs nothing and needs no internet: it runs `python -m transformer_lit.gpu_check check`
# from this checkout with the Python that already has torch and triton.
#
#   scripts/gpu_check.sh                 # on the GPU: correctness (bf16/fp16/fp32; G = H and G = H/4 key/value
#                                        # heads), tuning, benchmark (with a G = H/4 row), table last
#   scripts/gpu_check.sh --dry-run       # anywhere: the same code in the Triton interpreter on tiny CPU sizes
#   scripts/gpu_check.sh --json out.json --budget 300 --no-tune
#   scripts/gpu_check.sh show out.json   # print a saved report's goals and table again
#
# The report written by --json is rewritten after every step (a run stopped by a timeout keeps what it
# measured). To record a run: copy it to nbs/gpu_results/flash_triton.json and re-execute
# nbs/appendix_gpu_check.ipynb (python tools/run_nb.py nbs/appendix_gpu_check.ipynb) on any machine.
#
# Environment: PYTHON (default: .venv/bin/python if present, else python3); CHECK_TIMEOUT (default 600 s).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"   # use this checkout without installing it
export PYTHONUNBUFFERED=1                             # each line appears as it is logged, also through a pipe
if [ "${1:-}" = "show" ]; then exec "$PY" -m transformer_lit.gpu_check "$@"; fi
for a in "$@"; do
  if [ "$a" = "--dry-run" ]; then
    # the interpreter must be chosen before triton is imported; hide GPUs so the CPU path runs
    export TRITON_INTERPRET=1 CUDA_VISIBLE_DEVICES=""
  fi
done
exec timeout "${CHECK_TIMEOUT:-600}" "$PY" -m transformer_lit.gpu_check check "$@"
