#!/usr/bin/env python3
"""CPU check of tools/variants/mma_segments.py's fragment mapping: builds each m16n8k16 MMA's A
and B from the lanes' fragments as PTX lays them out (A: a lane's registers 0-3 hold M-row g
at k 2t, 2t+1; g + 8 there; g at 2t + 8, 2t + 9; g + 8 there. B: n = g at k 2t, 2t+1 and
2t + 8, 2t + 9. D: g at n 2t, 2t+1 and g + 8 there; g = lane / 4, t = lane % 4), with the
variant's loads (lane l: row l / 8, chunk 8 j + l % 8) and input parts (bf16 rounding and
residue), and compares the page's four dot products with numpy's. Exits nonzero on a mismatch.
"""
import numpy as np
rng = np.random.default_rng(2)
K, R = 2048, 4
W = rng.standard_normal((R, K)).astype(np.float32)
W = (W.view(np.uint32) & 0xFFFF0000).view(np.float32)
x = rng.standard_normal(K).astype(np.float32)
def bf16(a):
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)
xhi = bf16(x); xlo = bf16(x - xhi)
acc = np.zeros((32, 4), np.float64)
seen = np.zeros((R, K), int)
for j in range(32):
    A = np.full((16, 16), np.nan); B = np.full((16, 8), np.nan)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        r = lane // 8; c0 = 8 * (8 * j + lane % 8)
        w = W[r, c0:c0 + 8]; seen[r, c0:c0 + 8] += 1
        A[g, 2 * t], A[g, 2 * t + 1] = w[0], w[1]          # a0
        A[g + 8, 2 * t], A[g + 8, 2 * t + 1] = w[2], w[3]  # a1
        A[g, 2 * t + 8], A[g, 2 * t + 9] = w[4], w[5]      # a2
        A[g + 8, 2 * t + 8], A[g + 8, 2 * t + 9] = w[6], w[7]  # a3
        u, h = g >> 1, g & 1
        xb = 8 * (8 * j + 4 * (u >> 1) + t) + 2 * (u & 1)
        xs = xhi if h == 0 else xlo
        B[2 * t, g], B[2 * t + 1, g] = xs[xb], xs[xb + 1]            # b0
        B[2 * t + 8, g], B[2 * t + 9, g] = xs[xb + 4], xs[xb + 5]    # b1
    assert not np.isnan(A).any() and not np.isnan(B).any()
    D = A @ B
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        acc[lane] += [D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1]]
assert (seen == 1).all()
u = np.zeros(32)
for lane in range(32):
    g, t = lane >> 2, lane & 3
    sub0 = 2 * (g & 1); sub1 = sub0 + 1
    if t == sub0: u[lane] += acc[lane, 0] + acc[lane, 1]
    if t == sub1: u[lane] += acc[lane, 2] + acc[lane, 3]
out = [u[8 * r:8 * r + 8].sum() for r in range(4)]
ref = W.astype(np.float64) @ x.astype(np.float64)
rel = np.abs(np.array(out) - ref).max() / np.abs(ref).max()
print("rel", rel)
assert rel < 1e-5, rel
