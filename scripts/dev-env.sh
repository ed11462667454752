# Sourced by scripts/demo.sh and `make bench`: a local run with DEBUG off needs a SECRET_KEY.
# Generates one development key once, keeps it in var/dev-secret-key (git ignores var/; mode 600)
# and exports it, unless SECRET_KEY is already set. Never use this key in production.
PY=${PY:-.venv/bin/python}
mkdir -p var
if [ -z "${SECRET_KEY:-}" ]; then
  if [ ! -s var/dev-secret-key ]; then
    (umask 077 && "$PY" -c 'import secrets; print(secrets.token_urlsafe(50))' >var/dev-secret-key)
  fi
  SECRET_KEY=$(cat var/dev-secret-key)
fi
export SECRET_KEY
export DEBUG=false
