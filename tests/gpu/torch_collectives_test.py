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

Exits 77 (skipped), saying why, where torch or a GPU is missing; 1 when torch did
not load Collie's library (a torch that carries NCCL inside it cannot be redirected)
or any result is wrong. tests/gpu/run.sh runs it (step gpu_torch).
"""
import argparse
import datetime
import os
import random
import socket
import sys

COLLIE_NCCL_VERSION = (2, 19, 3)  # what Collie's ncclGetVersion reports


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as e:
    skip(f"PyTorch is not importable here ({e})")


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


def worker(rank, n, port, seed):
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
    rooted_and_gathering_cases(ck, n, rank, dev, seed)
    all_to_all_and_p2p_cases(ck, n, rank, dev, seed)
    premul_sum_case(ck, n, rank, dev, seed)
    dist.barrier()
    torch.cuda.synchronize()
    dist.destroy_process_group()
    for w in ck.wrong:
        print(f"[{rank}] WRONG {w} (seed {seed})")
    print(f"[{rank}] {ck.cases - len(ck.wrong)} of {ck.cases} cases exact")
    if ck.wrong:
        raise SystemExit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--np", type=int, default=3, help="ranks (processes, 2 to 8), all on the GPUs there are")
    args = ap.parse_args()
    if not 2 <= args.np <= 8:
        ap.error("--np must be 2 to 8 (the inputs are sized so that int8 holds every exact result)")
    if not torch.cuda.is_available():
        skip("torch sees no usable GPU")
    if not dist.is_nccl_available():
        skip("this torch was built without its NCCL backend")
    version = torch.cuda.nccl.version()
    if tuple(version[:3]) != COLLIE_NCCL_VERSION:
        print(f"FAIL: torch runs NCCL {version}, not Collie's {COLLIE_NCCL_VERSION}: put Collie's libnccl.so.2 in "
              f"LD_PRELOAD (a torch that links NCCL statically cannot be redirected)")
        sys.exit(1)
    seed = int(os.environ.get("COLLIE_TEST_SEED", random.randrange(1 << 31)))
    print(f"torch {torch.__version__} on Collie's NCCL {version}, {args.np} ranks on "
          f"{torch.cuda.device_count()} GPU(s), seed {seed} (rerun with COLLIE_TEST_SEED={seed})", flush=True)
    mp.spawn(worker, args=(args.np, free_port(), seed), nprocs=args.np, join=True)
    print(f"PASS: torch.distributed on Collie, {args.np} ranks")


if __name__ == "__main__":
    main()
