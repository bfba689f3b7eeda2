#!/bin/sh
# The pip-installed package, as a user installs it: a fresh virtual
# environment (python3.11 -m venv) with torch==2.13.0 (pip's cache has it),
# `pip install --no-build-isolation <repo>` (scikit-build-core runs the
# project's CMake; the build folder is kept in the build tree so a rerun is
# incremental), then `import zccl_torch` with no PYTHONPATH registers the
# backend and runs a one-rank group; the extension finds libhccl and
# libascendcl in the package by its $ORIGIN rpath.
# Usage: install_check.sh BUILD_DIR SOURCE_DIR
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
venv="$build/pip-venv"
unset PYTHONPATH
rm -rf "$venv"
python3.11 -m venv "$venv"
"$venv/bin/pip" install -q torch==2.13.0 numpy scikit-build-core
"$venv/bin/pip" install -q --no-build-isolation --config-settings=build-dir="$build/pip" "$src"
cd "$venv"
"$venv/bin/python" - <<'PY'
import datetime
import os
import sys

import torch
import torch.distributed as dist
import zccl_torch

assert "ZCCL" in dist.Backend._plugins
assert zccl_torch.__file__.startswith(sys.prefix), zccl_torch.__file__
store = dist.HashStore()
dist.init_process_group("zccl", store=store, rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=30))
t = torch.arange(5.0)
dist.all_reduce(t)
assert torch.equal(t, torch.arange(5.0))
dist.destroy_process_group()
print("pip-installed zccl_torch works:", zccl_torch.__file__)
PY
