# Shared shell for tools/e2e (source it from the repository root; bash only):
# the build every qosmapd script starts with.
#
#   e2e_build NAME   installs missing Debian packages (tools/deps), builds
#       qosmapd and qosmap (debug) and sets BIN to the build's bin path; exits
#       with "NAME: build failed" if the build fails.
#
# With QOSMAP_BIN_DIR set (tools/vm sets it: inside the VM the host's root is
# read-only and a build under emulation would take minutes) nothing is
# installed or built: BIN is that directory, which must hold both binaries.
e2e_build() {
  if [ -n "${QOSMAP_BIN_DIR:-}" ]; then
    [ -x "$QOSMAP_BIN_DIR/qosmapd" ] && [ -x "$QOSMAP_BIN_DIR/qosmap" ] \
      || { echo "$1: QOSMAP_BIN_DIR=$QOSMAP_BIN_DIR holds no qosmapd and qosmap"; exit 1; }
    BIN=$QOSMAP_BIN_DIR
    return 0
  fi
  tools/deps >/dev/null
  swift build --product qosmapd >/dev/null 2>&1 && swift build --product qosmap >/dev/null 2>&1 \
    || { echo "$1: build failed"; exit 1; }
  BIN=$(swift build --show-bin-path)
}

# kernel_at_least MAJOR MINOR: true when the running kernel is that version or
# later (what the datapaths' kernel-dependent defaults follow: queue.gso auto,
# the ebpf verifier without CAP_PERFMON).
kernel_at_least() {
  local maj min
  IFS=. read -r maj min _ <<<"$(uname -r | sed 's/[^0-9.].*//')"
  [ "${maj:-0}" -gt "$1" ] || { [ "${maj:-0}" -eq "$1" ] && [ "${min:-0}" -ge "$2" ]; }
}
