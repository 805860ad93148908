#!/usr/bin/env bash
# Bare-machine check (opt-in; minutes, ~2 GB of downloads): a Debian 12 tree built with debootstrap from
# Debian's archive, a fresh clone of this checkout's HEAD inside it, then the README's first command,
# `.ci/setup && .venv/bin/hilbench nightly`, as root in a chroot with /proc, /dev and /sys mounted.
# Prints the exit code and the time; exits with the nightly's (or setup's) exit code.
#
#   sudo tests/bench/bare_machine.sh [WORKDIR]     # WORKDIR kept for a re-run (default: a new /var/tmp folder)
#
# Needs: root, debootstrap (apt-get install -y debootstrap), network to deb.debian.org, PyPI and npm.
# DEBIAN_MIRROR and DEBIAN_SECURITY_MIRROR override the archives. Nothing of the host's bench (venv, caches, packages) is used.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${1:-$(mktemp -d /var/tmp/hilbench-bare.XXXXXX)}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
ROOT="$WORK/root"

[ "$(id -u)" -eq 0 ] || { echo "bare_machine: run as root (debootstrap and chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "bare_machine: apt-get install -y debootstrap" >&2; exit 2; }

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
bind() {  # mount TYPE/OPTIONS onto a folder of the tree; undone on exit, innermost first
  local target="$ROOT/$1"; shift
  mount "$@" "$target"
  mounted+=("$target")
}

started=$(date +%s)
if [ ! -x "$ROOT/usr/bin/apt-get" ]; then
  echo "bare_machine: debootstrap bookworm into $ROOT ($MIRROR)"
  debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || { echo "bare_machine: debootstrap failed, see $WORK/debootstrap.log" >&2; exit 3; }
fi
boot_s=$(( $(date +%s) - started ))
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
echo "deb $MIRROR bookworm main" >"$ROOT/etc/apt/sources.list"
echo "deb $MIRROR bookworm-updates main" >>"$ROOT/etc/apt/sources.list"
echo "deb $SECURITY bookworm-security main" >>"$ROOT/etc/apt/sources.list"

# the site's own network trust (an egress proxy's CA, say), which a bare machine here has before any package:
# its extra CA files (taken in when setup installs ca-certificates) and the variables that point tools at them
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$ROOT/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
  if [ -x "$ROOT/usr/sbin/update-ca-certificates" ]; then  # a kept tree: ca-certificates is in it already
    chroot "$ROOT" /usr/sbin/update-ca-certificates >/dev/null
  fi
fi
SITE_ENV=()
for var in SSL_CERT_FILE SSL_CERT_DIR PIP_CERT REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS \
  PIP_DEFAULT_TIMEOUT http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  if [ -n "${!var:-}" ]; then SITE_ENV+=("$var=${!var}"); fi
done

rm -rf "$ROOT/opt/npc-hil-bench"
git clone -q "$REPO" "$ROOT/opt/npc-hil-bench"   # the committed tree only: what a newcomer clones

bind proc -t proc proc
bind sys --rbind /sys
mount --make-rslave "$ROOT/sys"
bind dev --rbind /dev
mount --make-rslave "$ROOT/dev"

echo "bare_machine: .ci/setup && .venv/bin/hilbench nightly in the chroot (log: $WORK/run.log)"
set +e
ran=$(date +%s)
chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${SITE_ENV[@]}" \
  bash -c 'cd /opt/npc-hil-bench && .ci/setup && .venv/bin/hilbench nightly' >"$WORK/run.log" 2>&1
code=$?
set -e
run_s=$(( $(date +%s) - ran ))
tail -n 25 "$WORK/run.log"
echo "bare_machine: exit $code; debootstrap ${boot_s} s, setup + nightly ${run_s} s; $(uptime)"
exit "$code"
