#!/usr/bin/env python3
"""FlashAttention-3 (the peer's flash_attn, as nano-vllm calls it) on the shapes
tests/kernels/prefill_attention_bench times for this project: one causal sequence of 4k, 16k and
32k tokens, 16 query and 8 KV heads, head_dim 128, bf16; contiguous K/V (nano-vllm's prefill)
and the same K/V paged in blocks of 256 (a prefix-cache hit's path). TFLOP/s counted as
FlashAttention counts a causal pass (4 N^2 heads head_dim / 2).

    PYTHONPATH=<dir holding flash_attn> python3 tools/fa3_attention_bench.py
"""
import torch
from flash_attn import flash_attn_varlen_func

HEADS, KV_HEADS, DIM, BLOCK = 16, 8, 128, 256


def time_ms(fn, runs=15):
    for _ in range(3):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(runs):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]


def main():
    torch.manual_seed(0)
    print(f"FlashAttention-3 on {torch.cuda.get_device_name()}, causal, {HEADS} heads, "
          f"{KV_HEADS} kv heads, head_dim {DIM}, bf16")
    for n in (4096, 16384, 32768):
        q = torch.randn(n, HEADS, DIM, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(n, KV_HEADS, DIM, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(n, KV_HEADS, DIM, dtype=torch.bfloat16, device="cuda")
        cu = torch.tensor([0, n], dtype=torch.int32, device="cuda")
        scale = DIM ** -0.5
        flops = 4.0 * n * n * HEADS * DIM / 2
        ms = time_ms(lambda: flash_attn_varlen_func(q, k, v, n, cu, n, cu, softmax_scale=scale,
                                                    causal=True))
        print(f"  FA3 contiguous N {n:>5}: {ms * 1e3:>9.1f} us  {flops / ms / 1e9:>6.1f} TFLOP/s")
        blocks = n // BLOCK
        order = torch.randperm(blocks, device="cuda")
        k_cache = torch.empty(blocks, BLOCK, KV_HEADS, DIM, dtype=torch.bfloat16, device="cuda")
        v_cache = torch.empty_like(k_cache)
        k_cache[order] = k.view(blocks, BLOCK, KV_HEADS, DIM)
        v_cache[order] = v.view(blocks, BLOCK, KV_HEADS, DIM)
        table = order.to(torch.int32).view(1, blocks)
        ms = time_ms(lambda: flash_attn_varlen_func(q, k_cache, v_cache, n, cu, n, cu,
                                                    softmax_scale=scale, causal=True,
                                                    block_table=table))
        print(f"  FA3 paged      N {n:>5}: {ms * 1e3:>9.1f} us  {flops / ms / 1e9:>6.1f} TFLOP/s")


if __name__ == "__main__":
    main()
