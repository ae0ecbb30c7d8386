# Sourced by test.sh: finds a Chromium for the console's browser test, installing
# Debian's chromium package when none is found (as pg.sh does for PostgreSQL).
#   chromium_find -> exports TMEND_CHROMIUM (an executable path), or fails

chromium_path() {
  local c
  if [ -n "${TMEND_CHROMIUM:-}" ] && [ -x "$TMEND_CHROMIUM" ]; then echo "$TMEND_CHROMIUM"; return 0; fi
  for c in chromium chromium-browser google-chrome-stable google-chrome headless-shell; do
    if command -v "$c" >/dev/null 2>&1; then command -v "$c"; return 0; fi
  done
  return 1
}

chromium_install() {
  if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
    echo "chromium.sh: no Chromium found and apt-get is not usable here;" >&2
    echo "chromium.sh: install chromium, or set TMEND_CHROMIUM to a Chrome or Chromium binary" >&2
    return 1
  fi
  echo "chromium.sh: installing Debian's chromium package" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2
}

chromium_find() {
  local p
  p=$(chromium_path) || { chromium_install && p=$(chromium_path); } || return 1
  export TMEND_CHROMIUM=$p
}
