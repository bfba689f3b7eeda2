#!/bin/sh
# The pip-installed package, as a user installs it: a fresh virtual
# environment (python3.11 -m venv) with torch==2.13.0 (pip's cache has it),
# `pip install --no-build-isolation <repo>` (scikit-build-core runs the
# project's CMake; the build folder is kept in the build tree so a rerun is
# incremental), then `import zccl_torch` with no PYTHONPATH registers the
# backend and runs a one-rank group; the extension finds libhccl and
# libascendcl in the package by its $ORIGIN rpath. Then, as a user trains:
# `torchrun --nproc-per-node 4 train.py` with init_process_group("zccl") and
# no `import zccl_torch` (the wheel's "torch.backends" entry point registers
# it; with TORCH_DEVICE_BACKEND_AUTOLOAD=0 the same run fails: "Unknown
# backend type zccl"), DDP for a few steps, weights identical on every rank.
# Usage: install_check.sh BUILD_DIR SOURCE_DIR
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
venv="$build/pip-venv"
unset PYTHONPATH
# The Makefile generator builds one file at a time unless told.
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
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
cat >train.py <<'PY'
import torch
import torch.distributed as dist

dist.init_process_group("zccl")  # env:// from torchrun
torch.manual_seed(1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(100 + dist.get_rank())  # each rank its own data
for _ in range(5):
    opt.zero_grad()
    x = torch.randn(8, 16, generator=g)
    model(x).square().mean().backward()
    opt.step()
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
every = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
dist.all_gather(every, flat)
assert all(torch.equal(w, every[0]) for w in every), "weights differ across ranks"
if dist.get_rank() == 0:
    print("torchrun: %d ranks trained DDP on zccl, weights identical" % dist.get_world_size())
dist.destroy_process_group()
PY
OMP_NUM_THREADS=1 "$venv/bin/torchrun" --standalone --nproc-per-node 4 train.py
