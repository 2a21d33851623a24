#!/usr/bin/env bash
# Prepare a fresh machine: system packages (Java for Kafka and Spark, Maven for the Kafka jars,
# Prometheus and Alertmanager for the alert loop, iproute2's tc for the lab's network partition),
# the Python virtualenv with the project and its test extras. Idempotent and quick when done.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
# Prometheus and Alertmanager: the alert loop (`kbot run --alerts`, tests/alerts) runs its own copies on loopback.
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || need_apt+=(prometheus-alertmanager)
# tc (iproute2, in /usr/sbin): the failure lab's network-partition mode drops packets to one broker's ports on lo.
command -v tc >/dev/null 2>&1 || [ -x /usr/sbin/tc ] || [ -x /sbin/tc ] || need_apt+=(iproute2)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} from Debian packages" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: Python 3.11 or newer is needed; $($PY --version 2>&1) found. Set PYTHON=/path/to/python3.11." >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv

# Reinstall only when the declared dependencies changed.
stamp=.venv/.kbot-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
# A long step runs with a progress line every 20 s (elapsed time and what it is doing, from its
# log): a fresh install takes minutes, longer on a busy machine, and silence reads as a hang.
with_progress() {  # with_progress LABEL LOG CMD...: run CMD with its output in LOG
  local label=$1 log=$2 start=$SECONDS pid rc=0 last
  shift 2
  "$@" >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
      sleep 1
      kill -0 "$pid" 2>/dev/null || break
    done
    if kill -0 "$pid" 2>/dev/null; then
      last=$(grep -E '^(Collecting|Downloading|Installing|Building|Successfully|Obtaining|Preparing)' "$log" | tail -n 1 | cut -c1-100)
      echo "setup: $label: still running after $((SECONDS - start)) s${last:+ ($last)}" >&2
    fi
  done
  wait "$pid" || rc=$?
  return $rc
}

pip_install() {
  .venv/bin/python -m pip install --progress-bar off --upgrade pip &&
    .venv/bin/python -m pip install --progress-bar off -e '.[test,lint]'
}

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing Python dependencies into .venv (the first run downloads Spark: a few minutes, longer on a busy machine)" >&2
  # pip's and setuptools' own output (a BuildBackendWarning block for the editable install) goes to
  # a log, not above the console's prompt; on a failure its end is shown.
  log=.venv/pip-install.log
  t0=$SECONDS
  if ! with_progress "installing Python dependencies" "$log" pip_install; then
    tail -n 40 "$log" >&2
    echo "setup: installing the Python dependencies failed; the whole output is in $log" >&2
    exit 1
  fi
  echo "setup: Python dependencies installed in $((SECONDS - t0)) s" >&2
  echo "$want" > "$stamp"
fi

# The Delta Lake jars (lake/pom.xml) from Maven Central, before any Spark session needs them.
if ! with_progress "fetching the Delta Lake jars" .venv/fetch-delta.log bash scripts/fetch_delta.sh; then
  tail -n 20 .venv/fetch-delta.log >&2
  exit 1
fi  # the log holds the jar paths; setup stays quiet when all is done

# The bot's own modules as bytecode. pip compiles the packages it installs, but an editable install
# leaves ours as source, and where PYTHONDONTWRITEBYTECODE is set (as on these machines) every
# `kbot` process compiled them again: a one-shot `kbot ask hot-partitions` through the Connect
# server took 3.52 s instead of 3.12 s (medians of 6, alternated, 2 cores, scripts/bench_ask_lake.py's
# lake). compileall only rewrites the files that changed.
.venv/bin/python - <<'PY'
import compileall, tomllib

# the packages pyproject.toml installs ("bot*": bot and its subpackages)
with open("pyproject.toml", "rb") as f:
    include = tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]["include"]
# one process: a pool per package cost 0.19 s on every setup with nothing to compile, against 0.01 s,
# and the same 0.45 s for a fresh tree; the list (not a generator) compiles every package
ok = all([compileall.compile_dir(p.rstrip("*"), quiet=1) for p in include])
raise SystemExit(0 if ok else 1)
PY
