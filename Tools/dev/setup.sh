#!/usr/bin/env bash
# Installs what Strata needs from the system when it's missing: the LMDB and zstd
# development packages (headers, pkg-config files), their command-line tools (the tests
# check Strata's files with the stock `zstd` and `mdb_stat`), and pkg-config.
# Debian/Ubuntu (apt-get); elsewhere it says what to install and stops.
set -euo pipefail

missing=()
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
if command -v pkg-config >/dev/null 2>&1; then
    pkg-config --exists lmdb || missing+=(liblmdb-dev)
    pkg-config --exists libzstd || missing+=(libzstd-dev)
else
    missing+=(liblmdb-dev libzstd-dev)
fi
command -v zstd >/dev/null 2>&1 || missing+=(zstd)
command -v mdb_stat >/dev/null 2>&1 || missing+=(lmdb-utils)
# Optional peers the CLI tests load exports into, when they can be had.
for tool in sqlite3:sqlite3 dot:graphviz python3:python3; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool##*:}")
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "strata setup: please install: ${missing[*]} (no apt-get here)" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "strata setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log="$(mktemp -t strata-setup.XXXXXX)"
if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "strata setup: installing ${missing[*]} failed (log above)" >&2
    exit 1
fi
rm -f "$log"
