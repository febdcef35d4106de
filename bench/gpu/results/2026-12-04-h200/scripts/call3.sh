#!/usr/bin/env bash
# GPU call 3 of 2026-12-04: do the NaN-keeping 16-bit conversions (a97eb2a) cost the half-precision
# models time (call 2: gpt2_tiny_f16 and llama_tiny_bf16 0.93x of e21dd1a's, but bert_tiny, whose
# kernels are identical, 0.955x)?
#   1. bench/gpu/nan_cvt.cu: do the GPU's own conversion instructions keep NaN bits as the rule does?
#   2. gpt2_tiny_f16, llama_tiny_bf16 and bert_tiny at 128 x 64 compiled three times by this stitchc:
#      A and A2 (the same kernels, compiled twice: what two identical artifacts measure apart) and P
#      (stitch_device.cuh with the plain conversions of e21dd1a, carried as
#      .gpu/variant/stitch_device_plain_cvt.cuh and put in place for that compile: stitchc copies the
#      header from the source tree). Then A against A2 and A against P, ROUNDS rounds each.
R=${OUT:-/tmp/callr}
mkdir -p "$R"
cd "$(dirname "$0")/../../../../.." || exit 1
B=$PWD/.gpu
S=$B/bin/stitchc
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
ROUNDS=${ROUNDS:-8}
W=${W:-/tmp/cr3}
rm -rf "$W" && mkdir -p "$W/cvt"
t0=$SECONDS
at() { echo "[$((SECONDS - t0)) s] $*"; }
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
"$B/bin/nan_cvt" >"$W/cvt/nan_cvt.txt" 2>&1 ||
  { nvcc -O3 -arch=sm_90 -std=c++17 bench/gpu/nan_cvt.cu -o "$W/nan_cvt" && "$W/nan_cvt" >"$W/cvt/nan_cvt.txt" 2>&1; }
at "1. nan_cvt rc $?"
cat "$W/cvt/nan_cvt.txt"
H=runtime/device/include/stitch/device/stitch_device.cuh
cp "$H" "$W/header.keep"
models="gpt2_tiny_f16 llama_tiny_bf16 bert_tiny"
for m in $models; do
  for v in A A2; do
    "$S" compile "models/$m/model.onnx" -o "$W/$m.$v" --shape batch=128 --shape sequence=64 --arch sm_90 --no-emu >"$W/cvt/compile_$m.$v.log" 2>&1 &
  done
done
wait
cp "$B/variant/stitch_device_plain_cvt.cuh" "$H"
for m in $models; do
  "$S" compile "models/$m/model.onnx" -o "$W/$m.P" --shape batch=128 --shape sequence=64 --arch sm_90 --no-emu >"$W/cvt/compile_$m.P.log" 2>&1 &
done
wait
cp "$W/header.keep" "$H"
at "2. compiled: $(ls -d "$W"/*.A "$W"/*.A2 "$W"/*.P | wc -l) artifacts"
for m in $models; do
  cmp -s "$W/$m.A/kernels/kernels.fatbin" "$W/$m.A2/kernels/kernels.fatbin" && echo "$m: A and A2 fatbins identical"
  for v in A2 P; do
    "$S" bench "$W/$m.A" --backend cuda --iters 200 --warmup 20 --rounds "$ROUNDS" --against "$W/$m.$v" \
      --json "$W/cvt/$m.A_vs_$v.json" >"$W/cvt/$m.A_vs_$v.txt" 2>&1 || { echo "$m A vs $v FAILED"; tail -3 "$W/cvt/$m.A_vs_$v.txt"; }
  done
done
at "2. rounds done"
python3 - "$W/cvt" <<'PY'
import glob, json, os, sys
print("| model | A us | against | other us | rounds | other / A per round: min / median / max |")
print("|---|---|---|---|---|---|")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    j = json.load(open(f)); a = j["against"]
    m, v = os.path.basename(f)[:-5].split(".A_vs_")
    print(f"| {m} | {j['run_ms_median']*1e3:.1f} | {v} | {a['run_ms_median']*1e3:.1f} | {len(j['rounds'])} | "
          f"{a['ratio_min']:.3f} / {a['ratio_median']:.3f} / {a['ratio_max']:.3f} |")
PY
tar czf "$R/cvt.tgz" -C "$W" cvt
at "end"
