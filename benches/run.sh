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
#
# The Goals section at the top of RESULTS.md judges each goal of
# benches/goals.toml on this run. When the store bench runs and PostgreSQL's
# `initdb` is found (/usr/lib/postgresql/*/bin), a throwaway server is started
# on a Unix socket in a temp dir (fsync on, like the JSONL store's sync_data)
# and stopped on exit, so the store figures are measured on both stores side
# by side. The mlx bench uses LRG_MLX_PYTHON, else ~/.lrg-mlx-venv/bin/python
# when it exists.
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
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
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
pg_dir=""
pg_bin=""
as_pg=()
cleanup() {
  if [ -n "$pg_dir" ] && [ -f "$pg_dir/data/postmaster.pid" ]; then
    "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  [ -z "$pg_dir" ] || rm -rf "$pg_dir"
  rm -rf "$work"
}
trap cleanup EXIT

wants() { [ "${#only[@]}" -eq 0 ] || printf '%s\n' "${only[@]}" | grep -qx "$1"; }

# PostgreSQL for the store bench: a throwaway server, or a line saying why not.
pg_line=""
start_postgres() {
  if [ -n "${LRG_BENCH_PG:-}" ]; then
    pg_line="postgres: the server LRG_BENCH_PG names"
    return
  fi
  pg_bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/initdb" ]; then
    pg_line="postgres figures skipped: no initdb (Debian: apt-get install postgresql)"
    return
  fi
  pg_dir="$(mktemp -d "${TMPDIR:-/tmp}/lrg-bench-pg.XXXXXX")"
  if [ "$(id -u)" = 0 ]; then
    # initdb refuses root: run the server as the postgres user.
    if ! id postgres >/dev/null 2>&1; then
      pg_line="postgres figures skipped: running as root and there is no postgres user"
      return
    fi
    chown postgres: "$pg_dir"
    as_pg=(runuser -u postgres --)
  fi
  if ! "${as_pg[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -A trust -U lrg -E UTF8 --no-sync \
      >"$pg_dir/initdb.log" 2>&1; then
    pg_line="postgres figures skipped: initdb failed: $(tail -n 1 "$pg_dir/initdb.log")"
    return
  fi
  if ! "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 \
      -o "-k $pg_dir -c listen_addresses= -p 5432" start >/dev/null 2>&1; then
    pg_line="postgres figures skipped: the server did not start: $(tail -n 1 "$pg_dir/server.log" 2>/dev/null)"
    return
  fi
  export LRG_BENCH_PG="host=$pg_dir port=5432 user=lrg dbname=postgres"
  pg_line="postgres: $("$pg_bin/postgres" --version | sed 's/^postgres (PostgreSQL) /PostgreSQL /'), a throwaway server on a Unix socket (fsync on)"
}

# `peers`: the peer crates the providers bench runs side by side.
all_features="peers${features:+,$features}"
if wants store; then
  start_postgres
  [ -z "${LRG_BENCH_PG:-}" ] || all_features="$all_features,postgres"
fi
feature_args=(--features "$all_features")

# The mlx bench's Python: LRG_MLX_PYTHON, else the venv the set-up makes.
if [ -z "${LRG_MLX_PYTHON:-}" ] && [ -x "$HOME/.lrg-mlx-venv/bin/python" ]; then
  export LRG_MLX_PYTHON="$HOME/.lrg-mlx-venv/bin/python"
fi
mlx_line="mlx: Python ${LRG_MLX_PYTHON:-python3 (LRG_MLX_PYTHON not set)}"

ran=()
skipped=()
failed=()
while IFS=$'\t' read -r name req; do
  [ -n "$name" ] || continue
  if ! wants "$name"; then
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
  "features: $all_features"
  "benches run: ${ran[*]:-none}"
)
[ -z "$pg_line" ] || header+=("$pg_line")
if printf '%s\n' "${ran[@]}" "${failed[@]}" | grep -qx mlx; then header+=("$mlx_line"); fi
[ "${#skipped[@]}" -gt 0 ] && header+=("skipped: ${skipped[*]}")
[ "${#failed[@]}" -gt 0 ] && header+=("FAILED: ${failed[*]}")
cargo run --quiet --manifest-path "$manifest" -p lrg-benches --bin bench-report -- \
  --goals "$root/benches/goals.toml" "$work" "$out" "${header[@]}"
echo "wrote $out" >&2
[ "${#failed[@]}" -eq 0 ]
