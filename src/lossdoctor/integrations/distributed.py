"""DDP / FSDP2 / FSDP1: the probes live in `lossdoctor.signals.distributed` (the monitor attaches
them by itself, and the monitor sits below the integrations); re-exported here under their old name."""

from ..signals.distributed import (
    DDPProbe,
    ShardedGradProbe,
    distributed_probe,
    is_fsdp1,
    is_fsdp2,
    unwrap_data_parallel,
)

__all__ = ["DDPProbe", "ShardedGradProbe", "distributed_probe", "is_fsdp1", "is_fsdp2", "unwrap_data_parallel"]
