# Puts Node 22 (the Lambda runtime's major version, nodejs22.x) first on PATH, fetching it once from
# the npm registry's node-linux-<arch> package into a cache. Source it: `. scripts/use-node22.sh`.
# .ci/run does, so CI tests on the runtime's Node; npm itself stays the machine's (it runs on any Node).
# Cache: ${CHORIA_NODE_DIR:-$HOME/.cache/choria-node}/<version>.
NODE22_VERSION=22.23.5
case "$(uname -m)" in
  x86_64) node22_arch=x64 ;;
  aarch64 | arm64) node22_arch=arm64 ;;
  *) echo "use-node22: no node-linux package for $(uname -m)" >&2; return 1 ;;
esac
node22_dir="${CHORIA_NODE_DIR:-$HOME/.cache/choria-node}/$NODE22_VERSION"
if [ ! -x "$node22_dir/bin/node" ]; then
  echo "fetching node-linux-$node22_arch@$NODE22_VERSION from the npm registry into $node22_dir"
  node22_tmp=$(mktemp -d)
  (cd "$node22_tmp" && npm pack --silent "node-linux-$node22_arch@$NODE22_VERSION" >/dev/null && tar xzf ./*.tgz) || {
    rm -rf "$node22_tmp"
    return 1
  }
  mkdir -p "$(dirname "$node22_dir")"
  rm -rf "$node22_dir"
  mv "$node22_tmp/package" "$node22_dir"
  rm -rf "$node22_tmp"
fi
export PATH="$node22_dir/bin:$PATH"
unset node22_arch node22_dir node22_tmp
