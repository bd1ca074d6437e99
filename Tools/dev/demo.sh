#!/usr/bin/env bash
# Strata's main job from a fresh checkout: install what's missing, build the `strata`
# tool, and run it.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash Tools/dev/setup.sh
swift build --product strata -c release
exec .build/release/strata doctor "$@"
