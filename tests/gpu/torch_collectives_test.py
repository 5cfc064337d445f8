#!/usr/bin/env python3
"""PyTorch's torch.distributed "nccl" backend running on Collie's libnccl.so.2.

The third kind of Collie user: an unchanged PyTorch program, with Collie's
library put in NCCL's place by LD_PRELOAD. Ranks are processes (torch.multiprocessing),
all on the one GPU of a lent machine (rank r on GPU r modulo the count), which
NVIDIA's NCCL refuses and Collie allows.

Every call torch makes for these ops goes through ncclAllReduce, ncclReduceScatter,
ncclAllGather, ncclBroadcast, ncclReduce, grouped ncclSend/ncclRecv (all_to_all_single
with uneven splits, batch_isend_irecv, gather, scatter), ncclRedOpCreatePreMulSum and
the barrier. Inputs are random integers (seed printed; COLLIE_TEST_SEED replays),
small enough that every type holds the exact result, so each output is compared for
equality with a reference computed on the CPU from every rank's regenerated input.

  LD_PRELOAD=build-gpu/compat/nccl/libnccl.so.2 python3 tests/gpu/torch_collectives_test.py [--np N]

Exits 77 (skipped), saying why, where torch or a GPU is missing; 1 when torch is
installed but does not import (a symbol our library lacks), when the libnccl.so.2 in the
process is not Collie's, when a rank's communicator was not made by Collie (a torch that
carries NCCL inside it cannot be redirected), when the ranks do not finish within
--timeout seconds, or when any result is wrong. tests/gpu/run.sh runs it (step gpu_torch).

torch.cuda.nccl.version() is no evidence: it is the version of the nccl.h torch was
built with, whatever library is loaded. The library's own ncclGetVersion, and Collie's
log line for each communicator it makes, are.
"""
import argparse
import ctypes
import datetime
import glob
import importlib.util
import os
import random
import socket
import sys
import tempfile
import time

COLLIE_NCCL_VERSION = 21903  # what Collie's ncclGetVersion reports (2.19.3)


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def fail(why):
    print(f"FAIL: {why}", flush=True)
    sys.exit(1)


try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as e:
    if importlib.util.find_spec("torch") is None:
        skip(f"PyTorch is not installed here ({e})")
    # Under LD_PRELOAD, a function torch's libraries need and ours lacks stops the import.
    fail(f"PyTorch is installed but does not import ({e})")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def inputs(seed, rank, count, dtype, lo, hi):
    """Rank `rank`'s input: the same on every rank that regenerates it (CPU, int64)."""
    g = torch.Generator().manual_seed(seed * 1009 + rank)
    return torch.randint(lo, hi, (count,), generator=g, dtype=torch.int64)


INT_TYPES = [torch.int8, torch.uint8, torch.int32, torch.int64]
FLOAT_TYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


class Checker:
    def __init__(self, rank):
        self.rank, self.cases, self.wrong = rank, 0, []

    def same(self, what, got, want):
        self.cases += 1
        got = got.cpu().to(torch.float64)
        want = want.to(torch.float64)
        if got.shape != want.shape or not torch.equal(got, want):
            bad = (got != want).nonzero()
            first = int(bad[0][0]) if got.shape == want.shape and len(bad) else -1
            self.wrong.append(f"{what}: first wrong element {first}"
                              + (f": {got[first].item()} instead of {want[first].item()}" if first >= 0 else
                                 f": shape {tuple(got.shape)} instead of {tuple(want.shape)}"))


def all_reduce_cases(ck, n, rank, dev, seed):
    ops = [(dist.ReduceOp.SUM, "sum"), (dist.ReduceOp.PRODUCT, "prod"), (dist.ReduceOp.MIN, "min"),
           (dist.ReduceOp.MAX, "max")]
    for dtype in INT_TYPES + FLOAT_TYPES:
        for op, name in ops + ([(dist.ReduceOp.AVG, "avg")] if dtype in FLOAT_TYPES else []):
            for count in (0, 1, 4099):
                # prod: factors 1 or 2 from at most 6 ranks (int8 holds 2^6), 1 from the others; sums of a few
                # small values; avg of multiples of n, so that the sum divides exactly.
                def one(r):
                    if name == "prod":
                        return inputs(seed, r, count, dtype, 1, 3 if r < 6 else 2)
                    return inputs(seed, r, count, dtype, 0 if dtype == torch.uint8 else -9, 10) * (
                        n if name == "avg" else 1)

                every = [one(r) for r in range(n)]
                stack = torch.stack(every) if count else torch.zeros((n, 0), dtype=torch.int64)
                want = {"sum": stack.sum(0), "prod": stack.prod(0), "min": stack.min(0).values if count else stack[0],
                        "max": stack.max(0).values if count else stack[0],
                        "avg": stack.sum(0) // n}[name]
                t = every[rank].to(dtype).to(dev)
                dist.all_reduce(t, op=op)
                ck.same(f"all_reduce {name} {dtype} count {count}", t, want)


def rooted_and_gathering_cases(ck, n, rank, dev, seed):
    count = 1031  # odd: no rank count divides the total evenly into powers of two
    for dtype in (torch.int8, torch.bfloat16, torch.float32):
        every = [inputs(seed + 1, r, n * count, dtype, -9, 10) for r in range(n)]
        total = torch.stack(every).sum(0)
        out = torch.empty(count, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(out, every[rank].to(dtype).to(dev))
        ck.same(f"reduce_scatter_tensor {dtype}", out, total[rank * count:(rank + 1) * count])

        mine = [e[:count] for e in every]
        gathered = torch.empty(n * count, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(gathered, mine[rank].to(dtype).to(dev))
        ck.same(f"all_gather_into_tensor {dtype}", gathered, torch.cat(mine))
        # In place: this rank's block of the output is the input.
        gathered = torch.zeros(n * count, dtype=dtype, device=dev)
        gathered[rank * count:(rank + 1) * count] = mine[rank].to(dtype).to(dev)
        dist.all_gather_into_tensor(gathered, gathered[rank * count:(rank + 1) * count])
        ck.same(f"all_gather_into_tensor in place {dtype}", gathered, torch.cat(mine))

        root = n - 1
        t = mine[rank].to(dtype).to(dev)
        dist.broadcast(t, src=root)
        ck.same(f"broadcast from {root} {dtype}", t, mine[root])

        t = mine[rank].to(dtype).to(dev)
        dist.reduce(t, dst=min(1, n - 1), op=dist.ReduceOp.SUM)
        if rank == min(1, n - 1):
            ck.same(f"reduce {dtype}", t, torch.stack(mine).sum(0))

        g = [torch.empty(count, dtype=dtype, device=dev) for _ in range(n)] if rank == 0 else None
        dist.gather(mine[rank].to(dtype).to(dev), gather_list=g, dst=0)
        if rank == 0:
            ck.same(f"gather {dtype}", torch.cat(g), torch.cat(mine))

        out = torch.empty(count, dtype=dtype, device=dev)
        pieces = [every[0][r * count:(r + 1) * count].to(dtype).to(dev) for r in range(n)] if rank == 0 else None
        dist.scatter(out, scatter_list=pieces, src=0)
        ck.same(f"scatter {dtype}", out, every[0][rank * count:(rank + 1) * count])


def all_to_all_and_p2p_cases(ck, n, rank, dev, seed):
    # all_to_all_single with uneven splits, zeros included: rank s sends split(s, d) elements to rank d.
    rng = random.Random(seed)
    split = [[rng.choice([0, 1, 7, 300, 1000]) for _ in range(n)] for _ in range(n)]
    send_sizes = split[rank]
    recv_sizes = [split[s][rank] for s in range(n)]
    every = [inputs(seed + 2, s, sum(split[s]), torch.int64, -1000, 1000) for s in range(n)]
    out = torch.empty(sum(recv_sizes), dtype=torch.float32, device=dev)
    dist.all_to_all_single(out, every[rank].to(torch.float32).to(dev), output_split_sizes=recv_sizes,
                           input_split_sizes=send_sizes)
    want = torch.cat([every[s][sum(split[s][:rank]):sum(split[s][:rank + 1])] for s in range(n)])
    ck.same(f"all_to_all_single uneven {split}", out, want)

    # A ring of sends and receives in one batch.
    count = 4097
    mine = [inputs(seed + 3, r, count, torch.int32, -1000, 1000) for r in range(n)]
    got = torch.empty(count, dtype=torch.int32, device=dev)
    ops = [dist.P2POp(dist.isend, mine[rank].to(torch.int32).to(dev), (rank + 1) % n),
           dist.P2POp(dist.irecv, got, (rank - 1) % n)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    ck.same("batch_isend_irecv ring", got, mine[(rank - 1) % n])


def premul_sum_case(ck, n, rank, dev, seed):
    make = getattr(dist, "_make_nccl_premul_sum", None)
    if make is None:
        print(f"[{rank}] premul sum: this torch has no dist._make_nccl_premul_sum; not tried")
        return
    every = [inputs(seed + 4, r, 1000, torch.int64, -9, 10) for r in range(n)]
    t = every[rank].to(torch.float32).to(dev)
    dist.all_reduce(t, op=make(2.0))
    ck.same("all_reduce premul sum x2.0 float32", t, torch.stack(every).sum(0) * 2)


def collie_made_the_communicator(logs):
    """Whether Collie's log of this process (COLLIE_DEBUG_FILE, one file per pid) has its init line."""
    path = os.path.join(logs, f"collie.{os.getpid()}.log")
    try:
        with open(path) as f:
            return any(" ready: " in line for line in f)
    except OSError:
        return False


def worker(rank, n, port, seed, logs):
    gpus = torch.cuda.device_count()
    dev = torch.device("cuda", rank % gpus)
    torch.cuda.set_device(dev)
    kwargs = dict(backend="nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n,
                  timeout=datetime.timedelta(seconds=60))
    try:
        dist.init_process_group(device_id=dev, **kwargs)  # eager init where torch has device_id (2.3 and later)
    except TypeError:
        dist.init_process_group(**kwargs)
    ck = Checker(rank)
    all_reduce_cases(ck, n, rank, dev, seed)
    if not collie_made_the_communicator(logs):
        print(f"[{rank}] FAIL: no communicator of this rank was made by Collie (no 'ready' line in "
              f"{logs}/collie.{os.getpid()}.log): torch did not call our library", flush=True)
        raise SystemExit(1)
    rooted_and_gathering_cases(ck, n, rank, dev, seed)
    all_to_all_and_p2p_cases(ck, n, rank, dev, seed)
    premul_sum_case(ck, n, rank, dev, seed)
    dist.barrier()
    torch.cuda.synchronize()
    dist.destroy_process_group()
    for w in ck.wrong:
        print(f"[{rank}] WRONG {w} (seed {seed})")
    print(f"[{rank}] {ck.cases - len(ck.wrong)} of {ck.cases} cases exact", flush=True)
    if ck.wrong:
        raise SystemExit(1)


def loaded_nccl():
    """The libnccl files mapped into this process, and the version the one torch resolves reports."""
    with open("/proc/self/maps") as f:
        paths = sorted({line.split()[-1] for line in f if "libnccl" in line.split()[-1]})
    try:
        lib = ctypes.CDLL("libnccl.so.2")  # the loaded one, by its SONAME, when one is loaded
    except OSError as e:
        return paths, None, str(e)
    version = ctypes.c_int(0)
    lib.ncclGetVersion(ctypes.byref(version))
    return paths, version.value, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--np", type=int, default=3, help="ranks (processes, 2 to 8), all on the GPUs there are")
    ap.add_argument("--timeout", type=int, default=300, help="seconds the ranks may take in all (default 300)")
    args = ap.parse_args()
    if not 2 <= args.np <= 8:
        ap.error("--np must be 2 to 8 (the inputs are sized so that int8 holds every exact result)")
    if not torch.cuda.is_available():
        skip("torch sees no usable GPU")
    if not dist.is_nccl_available():
        skip("this torch was built without its NCCL backend")
    paths, version, why = loaded_nccl()
    try:
        built = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError) as e:
        built = f"unknown ({e})"
    print(f"torch {torch.__version__}, built against NCCL {built}; libnccl mapped: {paths or 'none'}; "
          f"its ncclGetVersion: {version}", flush=True)
    if version != COLLIE_NCCL_VERSION:
        fail(f"the libnccl.so.2 in this process is not Collie's ({why or f'version {version}'}): put Collie's in "
             f"LD_PRELOAD (a torch that links NCCL statically cannot be redirected)")
    seed = int(os.environ.get("COLLIE_TEST_SEED", random.randrange(1 << 31)))
    print(f"{args.np} ranks on {torch.cuda.device_count()} GPU(s), seed {seed} (rerun with COLLIE_TEST_SEED={seed})",
          flush=True)
    logs = tempfile.mkdtemp(prefix="collie-torch-")
    # Read by each rank's libnccl.so.2 as it loads: Collie's log, one file per process, shows that Collie made
    # the rank's communicator. Torch's watchdog and heartbeat defaults would turn a hang into minutes of dumps
    # and sleeps: keep a failure short (a user's settings win).
    for name, value in (("COLLIE_DEBUG", "INFO"), ("COLLIE_DEBUG_FILE", os.path.join(logs, "collie.%p.log")),
                        ("TORCH_NCCL_DUMP_ON_TIMEOUT", "0"), ("TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC", "1000"),
                        ("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "60")):
        os.environ.setdefault(name, value)
    ctx = mp.start_processes(worker, args=(args.np, free_port(), seed, logs), nprocs=args.np, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + args.timeout
    try:
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    p.kill()
                fail(f"the ranks did not finish within {args.timeout} s; Collie's logs: {logs}")
    except Exception as e:  # a rank failed: torch says which and how
        for f in sorted(glob.glob(os.path.join(logs, "collie.*.log"))):
            with open(f) as log:
                warnings = [line.rstrip() for line in log if " WARN " in line]
            for line in warnings[-5:]:
                print(f"{os.path.basename(f)}: {line}")
        fail(f"{type(e).__name__}: {e}")
    print(f"PASS: torch.distributed on Collie, {args.np} ranks")


if __name__ == "__main__":
    main()
