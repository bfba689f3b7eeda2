#!/bin/sh
# The installed package: cmake --install into a temporary prefix, then
# `import zccl_torch` from <prefix>/lib/python3/dist-packages registers the
# backend and runs a one-rank group (the extension finds libhccl by its RPATH).
# Usage: install_check.sh BUILD_DIR PYTHON
set -eu
build=$1
py=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
pkg=$(find "$prefix" -type d -name dist-packages | head -n 1)
test -f "$pkg/zccl_torch/__init__.py"
cd "$prefix"
PYTHONPATH="$pkg" "$py" - <<'PY'
import datetime
import os

import torch
import torch.distributed as dist
import zccl_torch

assert "ZCCL" in dist.Backend._plugins
assert zccl_torch.__file__.startswith(os.getcwd()), zccl_torch.__file__
store = dist.HashStore()
dist.init_process_group("zccl", store=store, rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=30))
t = torch.arange(5.0)
dist.all_reduce(t)
assert torch.equal(t, torch.arange(5.0))
dist.destroy_process_group()
print("installed zccl_torch works:", zccl_torch.__file__)
PY
