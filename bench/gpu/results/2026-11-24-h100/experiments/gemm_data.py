# Does the fp32 GEMM's time depend on its operands' values? BERT-base FFN1: 1024 x 768 x 3072.
import torch, statistics
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
M, K, N = 1024, 768, 3072
g = torch.Generator(device="cuda").manual_seed(0)
def rn(*s): return torch.randn(*s, device="cuda", generator=g)
gamma, beta = rn(K), rn(K)
W = rn(K, N)
x = torch.rand(M, K, device="cuda", generator=g) * 2 - 1
ln = torch.nn.functional.layer_norm(x, (K,), gamma, beta)
cases = {
  "A uniform[-1,1], W normal": (x, W),
  "A layernorm(x), W normal": (ln, W),
  "A uniform[-1,1], W gamma-scaled": (x, gamma[:, None] * W),
  "A normal, W normal": (rn(M, K), W),
  "A zeros, W normal": (torch.zeros(M, K, device="cuda"), W),
}
out = torch.empty(M, N, device="cuda")
def bench(A, B, reps=300):
  for _ in range(30): torch.mm(A, B, out=out)
  ts = []
  for _ in range(reps):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); torch.mm(A, B, out=out); e.record(); e.synchronize()
    ts.append(s.elapsed_time(e) * 1e3)
  return statistics.median(ts)
res = {k: [] for k in cases}
for rnd in range(3):
  for k, (A, B) in (list(cases.items()) if rnd % 2 == 0 else list(reversed(cases.items()))):
    res[k].append(bench(A, B))
for k, v in res.items():
  print(f"{k:36s} median us per round: " + " ".join(f"{t:7.1f}" for t in v) + f"   ({2*M*K*N/min(v)/1e6:.1f} TFLOP/s best)")
