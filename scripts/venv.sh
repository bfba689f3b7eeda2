#!/usr/bin/env bash
# The Python environment the PyTorch backend is built and tested with: .venv
# at the repository root (git-ignored), Python 3.11, PyTorch 2.13.0 (CPU),
# numpy and scikit-build-core. Made only when missing; prints the interpreter's
# path. The exact version matters: a looser spec may pull a multi-GB CUDA
# build. Usage: PY=$(scripts/venv.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${ZCCL_VENV:-.venv}
TORCH_VERSION=2.13.0
if ! "$VENV/bin/python" -c "import torch, numpy, scikit_build_core; \
assert torch.__version__.split('+')[0] == '$TORCH_VERSION'" 2>/dev/null; then
    echo "venv: making $VENV (torch==$TORCH_VERSION numpy scikit-build-core)" >&2
    python3.11 -m venv "$VENV"
    "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" numpy scikit-build-core >&2
fi
echo "$(cd "$VENV" && pwd)/bin/python"
