# Shared by the end-to-end scripts: a scratch directory, pass/fail counters and two checks.
#   expect NAME CODE PATTERN -- CMD...  CMD must exit with CODE and print PATTERN (grep -E; "" = any)
#   check NAME CMD...                   CMD must succeed
#   write_i64 FILE NAME DIMS VALUES     an int64 tensor as a bare TensorProto with raw data: DIMS
#                                       comma-separated, VALUES a Python list expression
# A check that took a second or more says how long, so a slower CI run shows which step grew.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

# " (N.N s)" for the time since $1 (an $EPOCHREALTIME), where it is a second or more.
took() {
  awk -v t0="$1" -v t1="$EPOCHREALTIME" 'BEGIN { d = t1 - t0; if (d >= 1) printf " (%.1f s)", d }'
}

expect() {
  local name=$1 code=$2 pattern=$3
  shift 4
  local out rc t0=$EPOCHREALTIME
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$code" ]; then
    echo "FAIL $name: exit $rc, wanted $code"; echo "$out" | sed 's/^/    /' | head -20; fail=$((fail + 1)); return
  fi
  if [ -n "$pattern" ] && ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output lacks /$pattern/"; echo "$out" | sed 's/^/    /' | head -20; fail=$((fail + 1)); return
  fi
  echo "ok   $name$(took "$t0")"
  pass=$((pass + 1))
}

check() {
  local name=$1 t0=$EPOCHREALTIME
  shift
  if "$@"; then echo "ok   $name$(took "$t0")"; pass=$((pass + 1)); else echo "FAIL $name"; fail=$((fail + 1)); fi
}

write_i64() {
  python3 - "$@" <<'PY'
import struct, sys
path, name, dims, values = sys.argv[1], sys.argv[2].encode(), [int(d) for d in sys.argv[3].split(",")], eval(sys.argv[4])
def varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out
raw = struct.pack(f"<{len(values)}q", *values)
msg = b"".join(b"\x08" + varint(d) for d in dims) + b"\x10" + varint(7)  # dims, then data_type INT64
msg += b"\x42" + varint(len(name)) + name + b"\x4a" + varint(len(raw)) + raw  # name, raw_data
open(path, "wb").write(msg)
PY
}
