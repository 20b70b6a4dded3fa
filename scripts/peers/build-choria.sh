#!/usr/bin/env bash
# Builds a real go-choria server (pinned) for the real-fleet tests and benchmarks.
#
# A plain `go install` of the module gives a server without agent providers: the plugin
# loaders are generated, not shipped. So we download the module from the Go module proxy,
# copy it to a writable build directory, run its plugin generator and build with the
# provisioning defaults a packaged server carries (a provisioning JWT file baked in).
#
# Idempotent: exits at once when the pinned binary exists. Go's module and build caches
# make a rebuild cheap. Output:
#   $CHORIA_PEERS_DIR/bin/choria-<version>        the server binary
#   $CHORIA_PEERS_DIR/bin/choria-<version>.env    facts the harness reads (JWT path, version)
#   $CHORIA_PEERS_DIR/choria-jwt/                 the directory the baked JWT path lives in;
#                                                 the harness bind-mounts a node's own
#                                                 directory over it in the node's namespace
set -euo pipefail

readonly version="v0.30.2"
readonly module="github.com/choria-io/go-choria"
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
readonly bin="$peers_dir/bin/choria-$version"
readonly env_file="$bin.env"
readonly jwt_dir="$peers_dir/choria-jwt"
readonly jwt_file="$jwt_dir/provisioning.jwt"

peer_lock choria

if [[ -x "$bin" && -f "$env_file" ]]; then
  echo "go-choria $version: $bin (cached)"
  exit 0
fi

peer_build_start choria

echo "go-choria $version: downloading from the Go module proxy"
info="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$module@$version")"
src_dir="$(jq -r .Dir <<<"$info")"
sha="$(jq -r '.Origin.Hash // "unknown"' <<<"$info")"
[[ -d "$src_dir" ]] || { echo "build-choria: module download gave no source dir: $info" >&2; exit 1; }

build_dir="$work/src"
cp -r "$src_dir" "$build_dir"
chmod -R u+w "$build_dir"

cd "$build_dir"
# go-choria pins github.com/choria-io/appbuilder v0.17.1, which the Go module proxy does not serve
# (403: "This module version is not available"). Only the CLI's app-builder mode uses it (a
# binary run under a name without "choria") and `choria tool builder` use it; the server does not.
# Cut both out of this build copy.
if ! GOFLAGS=-mod=mod go mod download github.com/choria-io/appbuilder 2>/dev/null; then
  echo "go-choria $version: appbuilder is not on the module proxy; building without the app-builder CLI mode"
  perl -0pi -e '
    s{^\s*"github.com/adrg/xdg"\n}{}m;
    s{^\s*"github.com/choria-io/(appbuilder|go-choria/providers/appbuilder)/[^"]*"\n}{}mg;
    s{func builderOptions\(\).*?(?=func systemConfigureIfRoot)}{func runBuilder() {\n\tfmt.Println("this build of choria has no app builder")\n\tos.Exit(1)\n}\n\n}s;
  ' cmd/cmd.go
  rm -f cmd/tool_builder.go
fi
echo "go-choria $version: generating plugin loaders (packager/plugins.yaml)"
go generate --run plugin

mkdir -p "$peers_dir/bin" "$jwt_dir"
pkg="$module/build"
ldflags=(
  "-X $pkg.Version=${version#v}"
  "-X $pkg.SHA=$sha"
  "-X $pkg.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  "-X $pkg.ProvisionJWTFile=$jwt_file"
)
echo "go-choria $version: building"
go build -trimpath -ldflags "${ldflags[*]}" -o "$work/choria" .

"$work/choria" buildinfo >/dev/null
cat >"$work/choria.env" <<EOF
CHORIA_VERSION=${version#v}
CHORIA_SHA=$sha
CHORIA_PROVISION_JWT_FILE=$jwt_file
EOF
mv "$work/choria.env" "$env_file"
mv "$work/choria" "$bin"
echo "go-choria $version: built $bin in $(( $(date +%s) - started ))s"
