# case: eager-only bandwidth probe for choosing an offload policy: times pinned and pageable host->device copies on a side stream with timing events; run as a script, never captured
import argparse

import torch


def measure(sizes_mb, pinned=True, repeats=10):
    stream = torch.cuda.Stream()
    results = []
    for mb in sizes_mb:
        n = mb * 1024 * 1024
        host = torch.empty(n, dtype=torch.uint8, pin_memory=pinned)
        dev = torch.empty(n, dtype=torch.uint8, device="cuda")
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        with torch.cuda.stream(stream):
            start.record()
            for _ in range(repeats):
                dev.copy_(host, non_blocking=pinned)
            end.record()
        end.synchronize()
        ms = start.elapsed_time(end) / repeats
        results.append((mb, n / ms / 1e6))
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--pageable", action="store_true")
    args = parser.parse_args()
    for mb, gbps in measure(args.sizes, pinned=not args.pageable):
        print(f"{mb:5d} MiB  {gbps:7.2f} GB/s")


if __name__ == "__main__":
    main()
