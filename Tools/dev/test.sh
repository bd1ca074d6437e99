#!/usr/bin/env bash
# Runs Strata's whole test suite from a fresh checkout: install what's missing, then
# `swift test`. Extra arguments go to `swift test` (for example `--filter LMDB`).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash Tools/dev/setup.sh
# At most 16 tests at once: run wider, hundreds of test stores are open together (some 2,000
# file descriptors, ~120 with the limit). The tests start child processes with posix_spawn
# (StrataTestSupport's ChildProcess), not Foundation's Process, whose run() on Swift 6.3.1 can
# crash reading /proc/self/fd, likelier the more descriptors are open (swift-corelibs-foundation
# PR #5472). Set the variable to override.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-16}"
exec swift test "$@"
