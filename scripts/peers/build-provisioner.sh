#!/usr/bin/env bash
# Builds the Go Choria Provisioner (github.com/choria-io/provisioner, pinned) for the side-by-side
# benchmark (bench/peer.ts) and runs against the real fleet. An ordinary Go module build from the
# Go module proxy: `go install` of the pinned pseudo-version, with the version stamped in as its
# release builds do. Where the proxy does not serve that version (some answer 403 for
# pseudo-versions), it builds the pinned commit from a local clone of the repository named by
# CHORIA_PROVISIONER_SRC (any git repository holding that commit), or says so and stops: build that
# commit yourself and point the bench at it with CHORIA_PROVISIONER_BIN=<binary>.
#
# Idempotent: exits at once when the pinned binary exists. Go's module and build caches make a
# rebuild cheap. Output:
#   $CHORIA_PEERS_DIR/bin/choria-provisioner-<version>   (CHORIA_PEERS_DIR defaults to ~/.cache/choria-peers)
# and the binary's path on stdout's last line.
set -euo pipefail

readonly module="github.com/choria-io/provisioner"
# Commit aca2b62 (2026-05-16 14:58:17 UTC), the one the audit read; v0.16.0 is its nearest tag,
# so Go names it v0.16.1-0.<commit time>-<12 hex>.
readonly commit="aca2b6263842"
readonly version="v0.16.1-0.20260516145817-$commit"
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
readonly bin="$peers_dir/bin/choria-provisioner-$version"

peer_lock provisioner

if [[ -x "$bin" ]]; then
  echo "choria-provisioner $version: cached"
  echo "$bin"
  exit 0
fi

peer_build_start provisioner

ldflags="-X $module/config.Version=${version#v}"
echo "choria-provisioner $version: resolving through the Go module proxy ($(go env GOPROXY))"
if info="$(cd "$work" && go list -m -json "$module@$version" 2>&1)"; then
  resolved="$(jq -r .Version <<<"$info")"
  hash="$(jq -r '.Origin.Hash // ""' <<<"$info")"
  if [[ "$resolved" != "$version" || ( -n "$hash" && "$hash" != "$commit"* ) ]]; then
    echo "build-provisioner: $module@$version resolved to $resolved (commit ${hash:-unknown}), not commit $commit" >&2
    exit 1
  fi
  echo "choria-provisioner $version: building"
  GOBIN="$work" GOFLAGS=-mod=mod go install -trimpath -ldflags "$ldflags" "$module@$version"
elif [[ -n "${CHORIA_PROVISIONER_SRC:-}" ]]; then
  echo "choria-provisioner $version: the module proxy did not serve it; building commit $commit from $CHORIA_PROVISIONER_SRC"
  if ! git -C "$CHORIA_PROVISIONER_SRC" cat-file -e "$commit^{commit}" 2>/dev/null; then
    echo "build-provisioner: CHORIA_PROVISIONER_SRC=$CHORIA_PROVISIONER_SRC has no commit $commit" >&2
    exit 1
  fi
  git clone -q --no-checkout "$CHORIA_PROVISIONER_SRC" "$work/src"
  git -C "$work/src" checkout -q "$commit"
  (cd "$work/src" && GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$work/provisioner" .)
else
  echo "build-provisioner: the module proxy did not serve $module@$version:" >&2
  echo "$info" >&2
  echo "build-provisioner: set CHORIA_PROVISIONER_SRC=<a clone of $module holding commit $commit>, or build it yourself and set CHORIA_PROVISIONER_BIN=<binary>" >&2
  exit 1
fi
# Not `provisioner --version`: its `run` command defaults --choria-config to the user's client.cfg
# as an existing file, so any invocation on a machine without one (CI, this harness) exits 1. The
# build info Go embeds says the main package is the provisioner's, and the stamped version string
# is in the binary's data (-trimpath keeps -ldflags out of the build info).
built="$(go version -m "$work/provisioner")"
if ! grep -Eq "^[[:space:]]+path[[:space:]]+$module\$" <<<"$built" || ! grep -aFq "${version#v}" "$work/provisioner"; then
  echo "build-provisioner: $work/provisioner is not $module stamped $version:" >&2
  echo "$built" >&2
  exit 1
fi
mv "$work/provisioner" "$bin"
echo "choria-provisioner $version: built in $(( $(date +%s) - started ))s"
echo "$bin"
