# What every GPU call's script starts with; a call script (bench/gpu/results/DATE/scripts/callN.sh)
# sources it, then names its work directory:
#   source "$(dirname "$0")/../../../call_env.sh"; W=${W:-/tmp/crN}; rm -rf "$W" && mkdir -p "$W"
# It leaves the shell in the repository root, with R the directory whose files come back (OUT),
# B the carried bundle (.gpu: stitchc builds, the shared libraries they link, prebuilt tools),
# ROUNDS and ITERS for stitchc bench, `at` to stamp a step with the seconds since the start, and
# the card's name, driver, memory and clocks printed first.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
R=${OUT:-/tmp/callr}
mkdir -p "$R"
B=$ROOT/.gpu
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
ITERS=${ITERS:-200}
ROUNDS=${ROUNDS:-8}
t0=$SECONDS
at() { echo "[$((SECONDS - t0)) s] $*"; }
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader ||
  echo "nvidia-smi: no GPU here"
