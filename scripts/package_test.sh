#!/bin/bash
# The Debian package, installed and run on a fresh Debian 12 root: the
# install steps of deploy/README.md ("Install"), checked end to end.
#
#   scripts/package_test.sh [BUILD_DIR]      # default: build
#
# 1. builds what the package holds (target package_contents) in BUILD_DIR
#    and the .deb with cpack;
# 2. debootstraps a minimal bookworm root in a temporary directory (the
#    downloaded base system is kept in $PHALANX_PACKAGE_CACHE, default
#    /var/cache/phalanx-package-test, and so are the .debs apt fetches);
# 3. installs the .deb there with apt (its dependencies come from the
#    Debian mirror) and runs phalanx-bootstrap;
# 4. runs phalanxd.service's own ExecStart line, with its EnvironmentFile,
#    as its User, in a network namespace of its own (loopback only);
# 5. waits until it serves, submits a gang over TLS with the admin token
#    (the installed phalanxctl), reads it back with the installed Python
#    client, and takes a backup into /var/backups/phalanx;
# 6. stops the daemon by its PID, unmounts /proc and /dev of the root and
#    removes it, also when a step fails.
# Needs root, debootstrap, unshare and a route to deb.debian.org. Not a CI
# test (it downloads): run by hand.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$repo/build}")
cache=${PHALANX_PACKAGE_CACHE:-/var/cache/phalanx-package-test}
mirror=http://deb.debian.org/debian
tarball=$cache/bookworm-minbase.tgz
work=""
root=""
inner_pid=""
start=$SECONDS

say() { echo "package_test [$((SECONDS - start))s]: $*"; }
die() { echo "package_test: FAILED: $*" >&2; exit 1; }

mounts_under() { awk -v r="$1" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r; }

cleanup() {
  local rc=$? m
  if [[ -n $inner_pid ]] && kill -0 "$inner_pid" 2>/dev/null; then
    kill "$inner_pid" 2>/dev/null || true
    wait "$inner_pid" 2>/dev/null || true
  fi
  if [[ -n $root ]]; then
    for m in $(mounts_under "$root"); do umount "$m" || umount -l "$m" || true; done
  fi
  if [[ -n $work ]]; then
    if [[ -n $root && -n $(mounts_under "$root") ]]; then
      echo "package_test: $root still has mounts; left in place" >&2
    else
      rm -rf "$work"
    fi
  fi
  ((rc == 0)) || echo "package_test: FAILED (exit $rc) after $((SECONDS - start))s" >&2
}

check_host() {
  (($(id -u) == 0)) || die "run as root (debootstrap, chroot, mount)"
  local tool
  for tool in debootstrap unshare chroot cpack ip; do
    command -v "$tool" >/dev/null || die "needs $tool (apt-get install debootstrap)"
  done
}

build_package() {
  [[ -f $build/CMakeCache.txt ]] || die "$build is not a configured build folder (scripts/build.sh)"
  cmake --build "$build" --target package_contents >/dev/null
  (cd "$build" && cpack -G DEB -B "$work/package" >/dev/null)
  deb=$(echo "$work"/package/phalanx_*.deb)
  [[ -f $deb ]] || die "cpack wrote no phalanx_*.deb"
  say "built $(basename "$deb") ($(du -h "$deb" | cut -f1)); Depends: $(dpkg-deb -f "$deb" Depends)"
}

make_root() {
  mkdir -p "$cache/archives"
  if [[ ! -f $tarball ]]; then
    say "downloading the bookworm base system into $tarball"
    debootstrap --variant=minbase --make-tarball="$tarball" bookworm "$work/tarball" "$mirror" >/dev/null
    rm -rf "$work/tarball"
  fi
  root=$work/root
  debootstrap --variant=minbase --unpack-tarball="$tarball" bookworm "$root" "$mirror" >/dev/null
  mount -t proc proc "$root/proc"
  mount --bind /dev "$root/dev"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  say "fresh Debian $(cat "$root/etc/debian_version") root in $root"
}

install_package() {
  cp "$cache"/archives/*.deb "$root/var/cache/apt/archives/" 2>/dev/null || true
  cp "$deb" "$root/tmp/"
  chroot "$root" apt-get update -qq
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    "/tmp/$(basename "$deb")" >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; die "apt-get install"; }
  cp "$root"/var/cache/apt/archives/*.deb "$cache/archives/" 2>/dev/null || true
  # shellcheck disable=SC2016  # dpkg-query's format, not the shell's
  chroot "$root" dpkg-query -W -f='${Package} ${Version} ${Status}\n' phalanx | grep -q 'install ok installed' ||
    die "phalanx is not installed"
  chroot "$root" getent passwd phalanx >/dev/null || die "no user phalanx"
  say "installed: $(chroot "$root" phalanxd --version 2>&1 | head -1)"
}

bootstrap() {
  chroot "$root" phalanx-bootstrap --name localhost --name 127.0.0.1 >"$work/bootstrap.log"
  local token
  token=$(cat "$root/etc/phalanx/admin.token")
  ! grep -qF "$token" "$work/bootstrap.log" || die "phalanx-bootstrap printed the token"
  chroot "$root" openssl verify -CAfile /etc/phalanx/tls/ca.crt /etc/phalanx/tls/server.crt >/dev/null
  chroot "$root" stat -c '%n %a %U:%G' /etc/phalanx/admin.token /etc/phalanx/auth.json \
    /etc/phalanx/tls/ca.key /etc/phalanx/tls/server.key
}

# Inside the root: phalanxd.service's ExecStart as its User, then the clients.
write_inner_script() {
  cat >"$root/root/run-unit.sh" <<'EOF'
#!/bin/bash
set -euo pipefail
unit=/usr/lib/systemd/system/phalanxd.service
# The unit's ExecStart (continuation lines joined) and its EnvironmentFile.
line=$(sed -n '/^ExecStart=/,/[^\\]$/p' "$unit" | sed 's/^ExecStart=//; s/\\$//' | tr '\n' ' ')
user=$(sed -n 's/^User=//p' "$unit")
set -a
while read -r env; do . "$env"; done < <(sed -n 's/^EnvironmentFile=-\{0,1\}//p' "$unit")
set +a
eval "set -- $line"
echo "unit: $*"
mkdir -p /var/lib/phalanx && chown "$user:$user" /var/lib/phalanx
setpriv --reuid="$user" --regid="$user" --init-groups -- "$@" >/var/log/phalanxd.log 2>&1 &
daemon=$!
trap 'kill "$daemon" 2>/dev/null || true; wait "$daemon" || true' EXIT
for _ in $(seq 150); do
  grep -q 'grpc listening on' /var/log/phalanxd.log && break
  kill -0 "$daemon" || { cat /var/log/phalanxd.log; exit 1; }
  sleep 0.2
done
grep 'listening on' /var/log/phalanxd.log
ctl=(phalanxctl --server "$PHALANX_LISTEN" --tls-ca /etc/phalanx/tls/ca.crt
     --token-file /etc/phalanx/admin.token)
"${ctl[@]}" submit --queue llm-finetune --pods 2 --gpus 8 --level rack --request-id install-check
"${ctl[@]}" list
"${ctl[@]}" get g-000001 | grep -E '^(State|Owner)'
if phalanxctl --server "$PHALANX_LISTEN" --tls-ca /etc/phalanx/tls/ca.crt list 2>/dev/null; then
  echo "a call without the token was served"; exit 1
fi
PHALANX_TOKEN=$(cat /etc/phalanx/admin.token) /usr/bin/python3 - <<'PY'
import os, phalanx
client = phalanx.Client(os.environ["PHALANX_LISTEN"], token=os.environ["PHALANX_TOKEN"],
                        tls=phalanx.Tls(ca_file="/etc/phalanx/tls/ca.crt"))
gang = client.get("g-000001")
print("python client:", gang.id, phalanx.hosts(gang, client.node_addresses()))
PY
"${ctl[@]}" backup /var/backups/phalanx/install-check
kill "$daemon"
wait "$daemon"
trap - EXIT
echo "phalanxd exited 0 on SIGTERM"
EOF
}

run_unit() {
  write_inner_script
  # A network namespace of its own: only a loopback, and no clash with
  # anything listening on this machine's 127.0.0.1:50051.
  # shellcheck disable=SC2016  # $1 is the inner shell's
  unshare --net /bin/bash -c 'ip link set lo up && exec chroot "$1" /bin/bash /root/run-unit.sh' \
    _ "$root" &
  inner_pid=$!
  wait "$inner_pid" || die "the unit's ExecStart and the clients (log above)"
  inner_pid=""
}

main() {
  check_host
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  work=$(mktemp -d /var/tmp/phalanx-package-test.XXXXXX)
  build_package
  make_root
  install_package
  bootstrap
  run_unit
  say "PASSED"
}

main
