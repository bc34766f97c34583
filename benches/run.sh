#!/usr/bin/env bash
# Run every bench listed in benches/Cargo.toml and write benches/RESULTS.md:
# per figure the value, its ratio to the group's baseline in the same run,
# the date, the machine and the load average.
#
#   benches/run.sh                  # every bench, criterion's default times
#   benches/run.sh --quick          # short warm-up and measurement (a format check)
#   benches/run.sh --features llama # also the llama benches (builds llama.cpp: cmake, libclang)
#   benches/run.sh --bench schema --bench text_tools   # only these
#   benches/run.sh --out /tmp/R.md  # write elsewhere
#
# Benches are found in benches/Cargo.toml, so a new [[bench]] entry is run
# without editing this script. One with `required-features = ["llama"]` is
# skipped unless --features llama is given.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
manifest="$root/benches/Cargo.toml"
out="$root/benches/RESULTS.md"
quick=0
features=""
only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --features) features="$2"; shift ;;
    --bench) only+=("$2"); shift ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# name<TAB>required-features, one line per [[bench]] block.
benches="$(awk '
  /^\[\[bench\]\]/ { if (name != "") print name "\t" req; name = ""; req = ""; inb = 1; next }
  /^\[/ { if (inb && name != "") print name "\t" req; name = ""; req = ""; inb = 0; next }
  inb && /^name *=/ { gsub(/^name *= *"|".*$/, ""); name = $0 }
  inb && /^required-features *=/ { sub(/^required-features *= */, ""); req = $0 }
  END { if (inb && name != "") print name "\t" req }
' "$manifest")"

crit_args=()
mode="criterion defaults"
if [ "$quick" = 1 ]; then
  crit_args=(--warm-up-time 1 --measurement-time 2)
  mode="quick (--warm-up-time 1 --measurement-time 2; groups that set their own times keep them)"
fi

cpu="$( (grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//') \
  || sysctl -n machdep.cpu.brand_string 2>/dev/null || echo unknown)"
[ -n "$cpu" ] || cpu=unknown
cores="$(nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo '?')"
load() { (cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) || uptime | sed 's/.*load averages*: *//'; }
load_start="$(load)"
started="$(date -u '+%Y-%m-%d %H:%M UTC')"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$root" status --porcelain 2>/dev/null | grep -v '^??' || true)" ]; then
  commit="$commit (with uncommitted changes)"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# `peers`: the peer crates the providers bench runs side by side.
feature_args=(--features "peers${features:+,$features}")

ran=()
skipped=()
failed=()
while IFS=$'\t' read -r name req; do
  [ -n "$name" ] || continue
  if [ "${#only[@]}" -gt 0 ] && ! printf '%s\n' "${only[@]}" | grep -qx "$name"; then
    continue
  fi
  if [[ "$req" == *llama* ]] && [[ "$features" != *llama* ]]; then
    skipped+=("$name (needs --features llama)")
    continue
  fi
  echo "== $name (load $(load))" >&2
  mkdir -p "$work/$name"
  if CRITERION_HOME="$work/$name" cargo bench --manifest-path "$manifest" -p lrg-benches \
      "${feature_args[@]}" --bench "$name" -- "${crit_args[@]}" >&2; then
    ran+=("$name")
  else
    failed+=("$name")
  fi
done <<< "$benches"

header=(
  "date: $started"
  "machine: $(uname -m), $cpu, $cores cores"
  "load average (1, 5, 15 min): $load_start at the start, $(load) at the end"
  "commit: $commit"
  "mode: $mode"
  "benches run: ${ran[*]:-none}"
)
[ "${#skipped[@]}" -gt 0 ] && header+=("skipped: ${skipped[*]}")
[ "${#failed[@]}" -gt 0 ] && header+=("FAILED: ${failed[*]}")
cargo run --quiet --manifest-path "$manifest" -p lrg-benches --bin bench-report -- \
  "$work" "$out" "${header[@]}"
echo "wrote $out" >&2
[ "${#failed[@]}" -eq 0 ]
