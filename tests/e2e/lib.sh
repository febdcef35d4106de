# Shared by the end-to-end scripts: a scratch directory, pass/fail counters and two checks.
#   expect NAME CODE PATTERN -- CMD...  CMD must exit with CODE and print PATTERN (grep -E; "" = any)
#   check NAME CMD...                   CMD must succeed
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
