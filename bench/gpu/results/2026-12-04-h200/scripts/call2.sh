#!/usr/bin/env bash
# GPU call 2 of 2026-12-04: every shipped model against e21dd1a's stitchc, which call 1 could not
# compile with (it reads its device header from the source tree it was built in, /tmp/base there:
# the header is carried as .gpu/base_include and put there). The kit prepared again with BASE, then
# only run.sh's step 4: NAME against NAME.base in ROUNDS rounds alternating the order.
R=${OUT:-/tmp/callr}
mkdir -p "$R"
cd "$(dirname "$0")/../../../../.." || exit 1
B=$PWD/.gpu
S=$B/bin/stitchc
mkdir -p /tmp/base/runtime/device/include && cp -r "$B/base_include/." /tmp/base/runtime/device/include/
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
ITERS=${ITERS:-200}
ROUNDS=${ROUNDS:-6}
W=${W:-/tmp/cr}
rm -rf "$W" && mkdir -p "$W/base"
t0=$SECONDS
at() { echo "[$((SECONDS - t0)) s] $*"; }
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
COMMIT=$(cat "$B/commit") STITCHC=$S BASE=$B/bin/stitchc_base JOBS=${JOBS:-14} timeout 200 bash bench/gpu/prepare.sh "$W/kit" >"$W/base/prepare.log" 2>&1
at "kit prepared, rc $?: $(tail -1 "$W/base/prepare.log")"
for d in "$W"/kit/time/*.base/; do
  name=$(basename "$d" .base)
  "$S" bench "$W/kit/time/$name" --backend cuda --iters "$ITERS" --warmup 20 --rounds "$ROUNDS" \
    --against "$d" --json "$W/base/base_$name.json" >"$W/base/base_$name.txt" 2>&1 ||
    { echo "bench $name against $name.base: FAILED"; tail -3 "$W/base/base_$name.txt"; }
  cp "$d/plan.txt" "$W/base/plan_$name.base.txt"
  cp "$W/kit/time/$name/plan.txt" "$W/base/plan_$name.txt"
done
at "rounds done"
python3 - "$W/base" <<'PY'
import glob, json, os, sys
print("| model | this build us | earlier build us | rounds | earlier / this per round: min / median / max |")
print("|---|---|---|---|---|")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "base_*.json"))):
    j = json.load(open(f))
    a = j["against"]
    print(f"| {os.path.basename(f)[5:-5]} | {j['run_ms_median']*1e3:.1f} | {a['run_ms_median']*1e3:.1f} | "
          f"{len(j['rounds'])} | {a['ratio_min']:.3f} / {a['ratio_median']:.3f} / {a['ratio_max']:.3f} |")
PY
tar czf "$R/base.tgz" -C "$W" base
at "end"
