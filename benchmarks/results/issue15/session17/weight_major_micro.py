# Isolated micro-benchmark of one mixed decoding-step projection (4 tasks x n examples, d_model 256): the code's
# x @ W_task^T (baddbmm) against weight-major W_task @ x^T, warm and with the caches flushed (48 MB touched) before each
# call; one thread. Usage: python weight_major_micro.py ROWS N  (ROWS 768: self-attention q/k/v; 256: cross q)
import torch, time, statistics, sys
import torch.nn.functional as F
torch.set_num_threads(1)
d, T, n, rows = 256, 4, int(sys.argv[2]), int(sys.argv[1])
x = torch.randn(T * n, 1, d)
Wt = torch.randn(T, rows, d); bt = torch.randn(T, rows)
Wb = Wt.transpose(1, 2).contiguous(); bias = bt[:, None, :]
Wsingle = torch.randn(rows, d); bsingle = torch.randn(rows)
flush = torch.empty(48 * 2**20 // 4)
def wx(x):
    xb = x.view(T, n, d)
    out = torch.baddbmm(bt[:, :, None], Wt, xb.transpose(1, 2))  # [T, rows, n]
    return out.transpose(1, 2).reshape(T * n, 1, rows)
def wx_nob(x):
    xb = x.view(T, n, d)
    out = torch.bmm(Wt, xb.transpose(1, 2))
    return out.transpose(1, 2).reshape(T * n, 1, rows) + 0
variants = {
  "single F.linear": lambda: F.linear(x, Wsingle, bsingle),
  "single addmm W@x^T": lambda: torch.addmm(bsingle[:, None], Wsingle, x.view(-1, d).t()).t().reshape(T*n, 1, rows),
  "batched baddbmm": lambda: torch.baddbmm(bias, x.view(T, n, d), Wb).reshape(T*n, 1, rows),
  "batched W@x^T": lambda: wx(x),
}
for k, f in variants.items():
    print(k, (f() - variants["single F.linear"]()).abs().max().item() if "single" in k else "")
ref = torch.baddbmm(bias, x.view(T, n, d), Wb).reshape(T*n, 1, rows)
print("batched diff", (wx(x) - ref).abs().max().item(), torch.equal(wx(x), ref))
for cold in (False, True):
    res = {k: [] for k in variants}
    for r in range(300):
        for k, f in variants.items():
            if cold: flush.add_(1.0)
            t = time.perf_counter(); f(); res[k].append(time.perf_counter() - t)
    print("cold" if cold else "warm", rows, "n per task", n)
    for k, v in res.items(): print(f"  {k:20s} {statistics.median(v)*1e6:8.1f} us")
