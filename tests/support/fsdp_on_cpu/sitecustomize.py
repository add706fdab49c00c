"""Let accelerate's FSDP2 path run on CPU processes (gloo), for the multi-process CPU proxy tests.

accelerate enables FSDP only for GPU-like distributed types: with ``use_cpu`` (which TRL sets on a
machine without CUDA) a launch with ``config/accelerate/fsdp.yaml`` silently becomes plain
multi-CPU data parallelism, and a test of it proves nothing about sharded parameters. PyTorch's
``fully_shard`` itself works on CPU with gloo, so this shim, loaded by Python at start-up when its
directory is on ``PYTHONPATH`` and ``CONCORD_FSDP_ON_CPU=1``, promotes accelerate's MULTI_CPU state
to FSDP with the plugin accelerate built from the launcher's FSDP settings. Everything else --
``accelerate launch``, the FSDP config file, concord's training entry point, TRL, transformers --
runs unchanged; the tests check that the parameters really are DTensor shards.
"""

import os

if os.environ.get("CONCORD_FSDP_ON_CPU") == "1":
    import accelerate.state as _state
    from accelerate.utils import DistributedType as _DistributedType

    _original_init = _state.AcceleratorState.__init__

    def _init(self, *args, fsdp_plugin=None, **kwargs):
        _original_init(self, *args, fsdp_plugin=fsdp_plugin, **kwargs)
        if self.distributed_type == _DistributedType.MULTI_CPU and fsdp_plugin is not None:
            self.distributed_type = _DistributedType.FSDP
            self.fsdp_plugin = fsdp_plugin
            _state.PartialState._shared_state["distributed_type"] = _DistributedType.FSDP

    _state.AcceleratorState.__init__ = _init

if os.environ.get("CONCORD_TEST_SPREAD_REWARD") == "1":
    import sys as _sys
    from pathlib import Path as _Path

    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
    import spread_reward as _spread_reward

    _spread_reward.register()
