"""What the torch.distributed baselines share: a free loopback port, joining an RPC group
(torch_rpc_ps.py, torch_rpc_mlp.py, torch_rpc_wide_deep.py) or a gloo process group
(torch_gloo_allreduce.py, torch_ddp_mlp.py) on loopback with one thread each, and running the
processes to collect what they put on the result queue.

    results = run_processes("torch_rpc_ps.py", run, 3, (free_port(), steps))   # None after an error
    # in run(rank, port, steps, result_queue): rpc = join_rpc(names, rank, port, 60)
    results = run_processes("torch_ddp_mlp.py", run, 2, (free_port(),), needs="gloo")
    # in run(rank, port, result_queue): dist = join_gloo(rank, 2, port, 60)
"""

import datetime
import os
import random
import socket
import sys


def _bindable(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port():
    """A loopback port nobody listens on, drawn below the kernel's ephemeral range as
    tests/support/processes.hpp draws them: a port the kernel handed out for 127.0.0.1:0 can be
    handed out again, to another process's connection, before the group's store binds it."""
    ephemeral_low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    if ephemeral_low > 12000:
        draw = random.Random(os.getpid() ^ int.from_bytes(os.urandom(4), "little"))
        for _ in range(200):
            port = draw.randrange(10000, ephemeral_low)
            if _bindable(port):
                return port
    # No room below the ephemeral range: one of its ports.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _on_loopback(port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ.setdefault("TP_SOCKET_IFNAME", "lo")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")


def join_rpc(names, rank, port, timeout_seconds):
    """This process as names[rank] of an RPC group on 127.0.0.1:port (TensorPipe over lo, one
    torch thread); the torch.distributed.rpc module."""
    _on_loopback(port)
    import torch
    import torch.distributed.rpc as rpc
    torch.set_num_threads(1)
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=4, rpc_timeout=timeout_seconds,
                                              init_method="tcp://127.0.0.1:%d" % port)
    rpc.init_rpc(names[rank], rank=rank, world_size=len(names), rpc_backend_options=options)
    return rpc


def join_gloo(rank, world_size, port, timeout_seconds):
    """This process as `rank` of a gloo process group of `world_size` on 127.0.0.1:port (the
    store there, gloo's pairs over lo, one torch thread); the torch.distributed module."""
    _on_loopback(port)
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=world_size,
                            timeout=datetime.timedelta(seconds=timeout_seconds))
    return dist


def _unusable(needs):
    """Why torch cannot run a group of kind `needs` ("rpc" or "gloo"); None when it can."""
    import torch.distributed as dist
    if not dist.is_available():
        return "torch.distributed is not available"
    if needs == "gloo":
        return None if dist.is_gloo_available() else "torch.distributed has no gloo backend"
    import torch.distributed.rpc as rpc
    return None if rpc.is_available() else "torch.distributed.rpc is not available"


def run_processes(script, run, nprocs, args, needs="rpc"):
    """run(rank, *args, result_queue) in `nprocs` spawned processes; what they put on the queue,
    or None, said on stderr under `script`'s name, when torch's RPC (needs="rpc") or gloo
    (needs="gloo") is unusable or one failed."""
    try:
        import torch.multiprocessing as mp
        why = _unusable(needs)
        if why is not None:
            raise RuntimeError(why)
    except Exception as e:  # noqa: BLE001
        print("%s: %s" % (script, e), file=sys.stderr)
        return None
    os.environ.setdefault("GLOG_minloglevel", "2")  # quiet the RPC agents' shutdown lines
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    try:
        mp.start_processes(run, args=tuple(args) + (queue,), nprocs=nprocs, join=True,
                           start_method="spawn")
    except Exception as e:  # noqa: BLE001
        print("%s: %s" % (script, e), file=sys.stderr)
        return None
    results = []
    while not queue.empty():
        results.append(queue.get())
    return results
