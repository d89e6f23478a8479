#!/bin/sh
# The report's browser test opens index.html in headless Chromium. Playwright's own browser
# download is not reachable offline, so the test drives Debian's `chromium` package: install it
# when it is missing (as root, or through sudo).
set -eu
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium
