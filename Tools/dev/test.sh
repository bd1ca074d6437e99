#!/usr/bin/env bash
# Runs Strata's whole test suite from a fresh checkout: install what's missing, then
# `swift test`. Extra arguments go to `swift test` (for example `--filter LMDB`).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash Tools/dev/setup.sh
exec swift test "$@"
