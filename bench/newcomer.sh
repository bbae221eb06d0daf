#!/usr/bin/env bash
# The first minutes of a new user, timed: a fresh clone, `./dev web` until the viewer answers
# HTTP 200, then the example sessions imported and the first search.
#
#   bench/newcomer.sh [RUNS]      (default 1; prints one line of figures per run)
#
# Each run clones this repository (its committed HEAD) into a temporary directory, so nothing of
# the working tree's .venv is reused; pip's download cache is, as on any machine that has
# installed the packages once ("after downloads" in the targets). Targets (bench/README.md):
# ready < 15 s, first search < 1 s.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-1}
port=$((20000 + RANDOM % 20000))

now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$2"; }

cpu() { awk '/^cpu/ {printf "%.2f s CPU", $2 + $3}' "$1"; }
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"

for run in $(seq 1 "$runs"); do
  work=$(mktemp -d)
  git clone -q "$here" "$work/threadline"
  cd "$work/threadline"
  export THREADLINE_HOME="$work/home"
  t0=$(now)
  # /usr/bin/time adds the CPU seconds of the whole setup (wall time on a shared machine
  # mostly measures the other processes; CPU time is what a quiet machine would wait)
  /usr/bin/time -f "cpu %U %S" -o "$work/web.cpu" ./dev web --no-browser --port "$port" \
    > "$work/web.log" 2>&1 &
  web=$!
  until curl -fsS -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; do
    if ! kill -0 "$web" 2>/dev/null; then cat "$work/web.log" >&2; exit 1; fi
    sleep 0.1
  done
  t1=$(now)
  pkill -INT -P "$web"; wait "$web" || true  # /usr/bin/time ignores SIGINT: stop its child
  venv_mb=$(du -sm .venv | cut -f1)

  # the examples as a user imports them, then the first search (the CLI, one process each)
  ex=$(.venv/bin/python -c "import threadline.examples as e, pathlib; print(pathlib.Path(str(e.path(e.EXAMPLES[0]))).parent)")
  t2=$(now)
  ./dev import auto "$ex"/*.json "$ex"/*.jsonl > /dev/null 2> "$work/import.log"
  t3=$(now)
  /usr/bin/time -f "cpu %U %S" -o "$work/search.cpu" ./dev search "theme colours in the terminal" > "$work/search.out"
  t4=$(now)
  ./dev search "kubernetes helm chart" > "$work/nomatch.out"
  t5=$(now)
  echo "run $run: web ready $(secs "$t0" "$t1") s, $(cpu "$work/web.cpu") (.venv ${venv_mb} MB, viewer packages only);" \
       "import examples $(secs "$t2" "$t3") s; first search $(secs "$t3" "$t4") s, $(cpu "$work/search.cpu")" \
       "($(grep -c '^[0-9]' "$work/search.out") hits); unrelated query $(secs "$t4" "$t5") s:" \
       "$(cat "$work/nomatch.out")"
  # the same with semantic search (every extra installed: this checkout's .venv, [dev] ⊃ [all]);
  # the import indexes every message with MiniLM, so the first search embeds only the query
  export THREADLINE_HOME="$work/home-semantic"
  t6=$(now)
  "$here/.venv/bin/threadline" import auto "$ex"/*.json "$ex"/*.jsonl > /dev/null 2> "$work/import2.log"
  t7=$(now)
  /usr/bin/time -f "cpu %U %S" -o "$work/search2.cpu" "$here/.venv/bin/threadline" search "theme colours in the terminal" > "$work/search2.out"
  t8=$(now)
  echo "run $run, semantic: import examples + indexing $(secs "$t6" "$t7") s" \
       "($(grep -c '^indexing' "$work/import2.log") progress lines); first search $(secs "$t7" "$t8") s, $(cpu "$work/search2.cpu")" \
       "($(grep -c '^[0-9]' "$work/search2.out") hits)"
  cd "$here"
  rm -rf "$work"
done
