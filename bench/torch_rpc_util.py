"""What the torch.distributed.rpc baselines (torch_rpc_ps.py, torch_rpc_mlp.py,
torch_rpc_wide_deep.py) share: a free loopback port, joining the RPC group on loopback with one
thread each, and running the processes to collect what they put on the result queue.

    results = run_processes("torch_rpc_ps.py", run, 3, (port, steps))   # None after an error
    # in run(rank, port, steps, result_queue): rpc = join_rpc(names, rank, port, 60)
"""

import os
import socket
import sys


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def join_rpc(names, rank, port, timeout_seconds):
    """This process as names[rank] of an RPC group on 127.0.0.1:port (TensorPipe over lo, one
    torch thread); the torch.distributed.rpc module."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ.setdefault("TP_SOCKET_IFNAME", "lo")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed.rpc as rpc
    torch.set_num_threads(1)
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=4, rpc_timeout=timeout_seconds,
                                              init_method="tcp://127.0.0.1:%d" % port)
    rpc.init_rpc(names[rank], rank=rank, world_size=len(names), rpc_backend_options=options)
    return rpc


def run_processes(script, run, nprocs, args):
    """run(rank, *args, result_queue) in `nprocs` spawned processes; what they put on the queue,
    or None, said on stderr under `script`'s name, when torch's RPC is unusable or one failed."""
    try:
        import torch.multiprocessing as mp
        import torch.distributed.rpc as rpc
        if not rpc.is_available():
            raise RuntimeError("torch.distributed.rpc is not available")
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
