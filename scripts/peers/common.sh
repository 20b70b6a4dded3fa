# The prologue the peer build scripts share; sourced, not run. It resolves the cache directory
# ($CHORIA_PEERS_DIR, default ~/.cache/choria-peers, made absolute, with bin/ in it) into
# $peers_dir, and gives each script one build of its peer at a time and, for a build that has to
# run, Go, a scratch directory and the start time.

peers_dir="${CHORIA_PEERS_DIR:-$HOME/.cache/choria-peers}"
mkdir -p "$peers_dir/bin"
peers_dir="$(cd "$peers_dir" && pwd -P)"
readonly peers_dir

# peer_lock NAME: waits for, then holds until the script exits, the lock of peer NAME's build, so
# concurrent runs build once and the others find the cached binary.
peer_lock() {
  exec 9>"$peers_dir/.build-$1.lock"
  flock 9
}

# peer_build_start NAME: fails unless Go is on PATH; sets $started (epoch seconds) and $work (a
# scratch directory under $peers_dir, removed when the script exits).
peer_build_start() {
  command -v go >/dev/null || { echo "build-$1: Go is required (go not on PATH)" >&2; exit 1; }
  started=$(date +%s)
  work="$(mktemp -d "$peers_dir/.build-$1.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
}
