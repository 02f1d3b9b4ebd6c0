#!/usr/bin/env bash
# Installs exactly the Debian 12 packages Phalanx needs to build, test and run.
# Idempotent: does nothing when every package is already installed. Works as
# root or through sudo.
set -euo pipefail

packages=(
  cmake ninja-build ccache g++ pkg-config clang-format openssl libssl-dev dpkg-dev
  clang libclang-rt-14-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libabsl-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-grpcio python3-protobuf python3-matplotlib python3-pytest python3-yaml
  libcli11-dev nlohmann-json3-dev libgoogle-perftools-dev
  etcd-server etcd-client golang-etcd-server-dev golang-github-gogo-protobuf-dev
  golang-github-grpc-ecosystem-grpc-gateway-dev
)

# The launcher's real torch.distributed test (tests/ctl_run_test.cc) needs
# python3-torch (167 packages, about 50 s to install); it is skipped with a
# message where torch is missing. CI installs it: scripts/test.sh sets
# PHALANX_WITH_TORCH=1 there.
if [ "${PHALANX_WITH_TORCH:-}" = 1 ]; then packages+=(python3-torch); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
  --no-install-recommends "${missing[@]}" >/dev/null
