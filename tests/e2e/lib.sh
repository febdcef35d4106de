# Shared by the end-to-end scripts: a scratch directory, pass/fail counters and two checks.
#   expect NAME CODE PATTERN -- CMD...  CMD must exit with CODE and print PATTERN (grep -E; "" = any)
#   check NAME CMD...                   CMD must succeed
#   write_i64 FILE NAME DIMS VALUES     an int64 tensor as a bare TensorProto with raw data: DIMS
#                                       comma-separated, VALUES a Python list expression
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

expect() {
  local name=$1 code=$2 pattern=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$code" ]; then
    echo "FAIL $name: exit $rc, wanted $code"; echo "$out" | sed 's/^/    /' | head -20; fail=$((fail + 1)); return
  fi
  if [ -n "$pattern" ] && ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output lacks /$pattern/"; echo "$out" | sed 's/^/    /' | head -20; fail=$((fail + 1)); return
  fi
  echo "ok   $name"
  pass=$((pass + 1))
}

check() {
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; pass=$((pass + 1)); else echo "FAIL $name"; fail=$((fail + 1)); fi
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
