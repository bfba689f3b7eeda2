"""Registers the zccl backend when torch is imported (pip-installed wheel).

The wheel names ``register`` as an entry point of the group
``torch.backends``, which ``import torch`` calls (PyTorch 2.5 and later,
unless ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``). So a script run by torchrun that
calls ``init_process_group("zccl")`` without importing zccl_torch works.
A failure to load the extension must not break ``import torch``: it becomes
one warning, and ``import zccl_torch`` shows the error itself.
"""


def register():
    try:
        import zccl_torch  # noqa: F401  (registers "zccl" with torch.distributed)
    except Exception as e:  # noqa: BLE001 - never fail torch's own import
        import warnings

        warnings.warn("zccl_torch: the zccl backend is not registered (%s: %s); "
                      "import zccl_torch to see why" % (type(e).__name__, e))
