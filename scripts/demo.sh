#!/usr/bin/env bash
# Runs MemoryHub for a new user: migrate the embedded SQLite database, load the seed scenario,
# start the web server and a Celery worker with embedded beat (filesystem broker under var/),
# print the URL and login, and stop both cleanly on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
HOST=${MEMORYHUB_HOST:-127.0.0.1}
PORT=${MEMORYHUB_PORT:-8000}
# Where SQLite, the broker and the logs live (MEMORYHUB_VAR_DIR, as the settings read it).
VAR=${MEMORYHUB_VAR_DIR:-var}
mkdir -p "$VAR/log" "$VAR/staticfiles"

# The demo runs like production: DEBUG off (a visitor sees the styled error pages, never Django's
# debug page), with a development SECRET_KEY generated once under var/ (an exported one wins).
. scripts/dev-env.sh

echo "==> migrating the database ($(
  $PY -c 'import os; print(os.environ.get("DATABASE_URL") or "SQLite " + os.environ.get("MEMORYHUB_VAR_DIR", "var") + "/memoryhub.sqlite3")'))"
$PY manage.py migrate --no-input -v 0

echo "==> loading the demo data (the payments API test-generation scenario)"
$PY manage.py load_demo --skip-if-loaded

echo "==> starting the Celery worker with beat (log: $VAR/log/worker.log)"
.venv/bin/celery -A memoryhub.celery worker -B -s "$VAR/celerybeat-schedule" --loglevel=INFO \
  --concurrency=2 >"$VAR/log/worker.log" 2>&1 &
WORKER=$!

cleanup() {
  echo
  echo "==> stopping (worker pid $WORKER, web server pid ${WEB:-?})"
  [ -n "${WEB:-}" ] && kill "$WEB" 2>/dev/null || true
  kill "$WORKER" 2>/dev/null || true
  wait 2>/dev/null || true
  echo "==> stopped"
}
trap cleanup EXIT INT TERM

echo "==> starting the web server (log: $VAR/log/web.log)"
$PY manage.py runserver --noreload "$HOST:$PORT" >"$VAR/log/web.log" 2>&1 &
WEB=$!

# Wait for the server, then let the worker compact the second demo workflow.
for _ in $(seq 1 60); do
  if $PY - "$HOST" "$PORT" <<'PYEOF' 2>/dev/null; then break; fi
import sys, urllib.request
urllib.request.urlopen(f"http://{sys.argv[1]}:{sys.argv[2]}/accounts/login/", timeout=1)
PYEOF
  sleep 0.5
done
$PY manage.py load_demo --live-steps || echo "(live demo steps skipped; see $VAR/log/worker.log)"

cat <<MSG

  MemoryHub is running:  http://$HOST:$PORT/
  Log in as:             demo / demo-pass   (reviewer: rita / demo-pass, viewer: vic / demo-pass)
  API docs:              http://$HOST:$PORT/api/docs/
  Demo API key:          see $VAR/demo-api-key.txt

  Press Ctrl-C to stop the web server and the worker.
MSG
wait "$WEB"
