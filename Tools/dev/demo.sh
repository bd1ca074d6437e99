#!/usr/bin/env bash
# Strata's main job from a fresh checkout: install what's missing, build the `strata`
# tool, build the demo store (seed 004's League Manager with a real history, partly
# compacted) in ./strata-demo — replacing the one a previous run left — and print its
# audit trail with `strata log`.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash Tools/dev/setup.sh
swift build --product strata -c release
strata=.build/release/strata
store=strata-demo
"$strata" demo "$store" --force
echo
echo "\$ strata log $store"
"$strata" log "$store"
echo
echo "That was the whole audit trail. To run the demo's \"Try next\" commands above, put the"
echo "tool on your PATH first:  export PATH=\"$PWD/.build/release:\$PATH\""
