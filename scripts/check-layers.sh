#!/usr/bin/env bash
# Checks that the library's include graph runs one way down: hal <- ops <- dist <- backends
# <- model, with the case library (check/) above the ops and the registry. A source in a
# layer includes only its own layer and the ones below it (tools/, tests/, bench/, python/
# and fuzz/ sit on top and may include any). Usage: scripts/check-layers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A allowed=(
  [hal]="hal"
  [ops]="hal ops"
  [dist]="hal ops dist"
  [backends]="hal ops dist backends"
  [model]="hal ops dist model"
  [check]="hal ops check"
)
bad=0
for layer in "${!allowed[@]}"; do
  while IFS= read -r line; do
    file=${line%%:*}
    dir=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$line")
    # Only the project's own top-level folders count (not "hwy/..." and other libraries).
    [ -d "$dir" ] || continue
    case " ${allowed[$layer]} " in *" $dir "*) ;; *)
      echo "check-layers: $file ($layer) includes $dir/: ${line#*:}"
      bad=1
      ;;
    esac
  done < <(git ls-files "$layer/" | grep -E '\.(h|hpp|cpp|cu|cuh)$' | xargs grep -HE '^#include "[a-z_]+/' || true)
done
if [ $bad -ne 0 ]; then
  echo "check-layers: the includes above run against the layering (hal <- ops <- dist <- backends <- model)" >&2
  exit 1
fi
echo "check-layers: the include graph runs one way (hal <- ops <- dist <- backends <- model; check/ over ops)"
