#!/usr/bin/env bash
# Build the arm64 Debian userland the aarch64 tests run against (tests/aarch64/).
#
#   tests/aarch64/build_userland.sh [CACHE_DIR]      (default: tests/.cache/aarch64)
#
# Needs root, debootstrap, qemu-user-static and a binfmt_misc entry for aarch64 (this
# script mounts binfmt_misc and enables qemu-aarch64 through update-binfmts when it can).
# Produces, under CACHE_DIR:
#   rootfs/   debootstrap'd bookworm arm64 (minbase + python3, python3-venv), with
#             /opt/vllm      a venv holding the real aarch64 torch_npu and vllm_ascend wheels
#                            (--no-deps: no torch, no CANN, as on a Kunpeng host without CANN)
#             /opt/doctor    a venv holding ascend-doctor built from this checkout + its deps
#             /etc/ld.so.cache written by the userland's own (arm64) ldconfig under qemu
#   wheels/   the wheels installed there (torch_npu / vllm_ascend from tests/artifacts.py's
#             aarch64 cache, the doctor's wheel, its deps by pip download --platform *_aarch64)
# A stamp file records what was built; a rerun with the same inputs does nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
CACHE=${1:-$REPO/tests/.cache/aarch64}
ROOT=$CACHE/rootfs
WHEELS=$CACHE/wheels
SUITE=${AARCH64_SUITE:-bookworm}
MIRROR=${AARCH64_MIRROR:-http://deb.debian.org/debian}
TORCH_NPU=${AARCH64_TORCH_NPU:-torch-npu==2.14.0}
VLLM_ASCEND=${AARCH64_VLLM_ASCEND:-vllm-ascend==0.23.0}
HOSTPY=${HOSTPY:-$REPO/.venv/bin/python}  # needs pip; tests.artifacts is imported from $REPO
STAMP_WANT="suite=$SUITE torch=$TORCH_NPU vllm=$VLLM_ASCEND doctor=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)"
t0=$SECONDS
step() { printf '[aarch64 %4ds] %s\n' $((SECONDS - t0)) "$*"; }

[ "$(id -u)" = 0 ] || { echo "build_userland.sh: needs root (debootstrap, chroot)" >&2; exit 2; }
for t in debootstrap qemu-aarch64-static chroot; do
  command -v "$t" >/dev/null || { echo "build_userland.sh: $t not installed (apt-get install debootstrap qemu-user-static binfmt-support)" >&2; exit 2; }
done

# binfmt_misc: the kernel must hand arm64 ELF files to qemu (chroot runs /bin/sh of the userland)
if [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
  mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] && command -v update-binfmts >/dev/null; then
  update-binfmts --enable qemu-aarch64 || true
fi
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || { echo "build_userland.sh: no binfmt_misc entry for aarch64" >&2; exit 3; }
INTERP=$(sed -n 's/^interpreter //p' /proc/sys/fs/binfmt_misc/qemu-aarch64)

if [ -f "$ROOT/.ascend-doctor-stamp" ] && [ "$(cat "$ROOT/.ascend-doctor-stamp")" = "$STAMP_WANT" ]; then
  step "up to date: $ROOT ($STAMP_WANT)"
  exit 0
fi

# 1. the base system: first stage on the host, second stage inside under qemu
if [ ! -f "$ROOT/.debootstrap-done" ]; then
  rm -rf "$ROOT"
  mkdir -p "$ROOT"
  step "debootstrap --foreign $SUITE arm64 from $MIRROR"
  debootstrap --arch=arm64 --variant=minbase --foreign \
    --include=python3,python3-venv,libc-bin "$SUITE" "$ROOT" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -20 "$CACHE/debootstrap.log"; exit 1; }
fi
# the interpreter path binfmt names must exist inside the chroot (no F flag on Debian's entry)
install -D -m 0755 "$(command -v qemu-aarch64-static)" "$ROOT$INTERP"
install -D -m 0755 "$(command -v qemu-aarch64-static)" "$ROOT/usr/bin/qemu-aarch64-static"
if [ ! -f "$ROOT/.debootstrap-done" ]; then
  step "debootstrap --second-stage (arm64 dpkg under qemu)"
  chroot "$ROOT" /debootstrap/debootstrap --second-stage >>"$CACHE/debootstrap.log" 2>&1 \
    || { tail -20 "$CACHE/debootstrap.log"; exit 1; }
  touch "$ROOT/.debootstrap-done"
fi

# the doctor's optional C scanners are built by the userland's own (arm64) gcc: a wheel
# built here would be x86_64, and the pure-Python fallback would leave them untested
if [ ! -x "$ROOT/usr/bin/gcc" ] || [ ! -e "$ROOT/usr/include/python3.11/Python.h" ]; then
  step "apt-get install gcc python3-dev inside the userland (arm64 dpkg under qemu)"
  chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc libc6-dev python3-dev' \
    >>"$CACHE/apt.log" 2>&1 || { tail -20 "$CACHE/apt.log"; exit 1; }
fi

# 2. wheels: the real aarch64 torch_npu / vllm_ascend (tests/artifacts.py, cached in
#    tests/.cache/wheels-aarch64), the doctor built from this checkout and its aarch64 deps
PYV=$(chroot "$ROOT" /usr/bin/python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
[ "$PYV" = 3.11 ] || { echo "build_userland.sh: the userland has Python $PYV; the wheels are fetched for 3.11" >&2; exit 1; }
mkdir -p "$WHEELS"
step "aarch64 wheels for CPython $PYV: $TORCH_NPU $VLLM_ASCEND"
mapfile -t ASCEND_WHEELS < <("$HOSTPY" -m tests.artifacts "$TORCH_NPU" 'torch_npu-*.whl' "$VLLM_ASCEND" 'vllm_ascend-*.whl' 2> >(grep -v "^WARNING: Location" >&2))
printf '  %s\n' "${ASCEND_WHEELS[@]}"
rm -f "$WHEELS"/*.whl "$WHEELS"/*.tar.gz
"$HOSTPY" -m build --version >/dev/null 2>&1 || "$HOSTPY" -m pip install -q build
"$HOSTPY" -m build -q --sdist -o "$WHEELS" "$REPO" >"$CACHE/sdist.log" 2>&1 || { tail -20 "$CACHE/sdist.log"; exit 1; }
DEPS=$("$HOSTPY" - "$REPO/pyproject.toml" <<'EOF2'
import sys
try:
    import tomllib
except ImportError:
    import tomli as tomllib
with open(sys.argv[1], "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["dependencies"]))
EOF2
)
mapfile -t DEPARR <<<"$DEPS"
DEPARR+=("setuptools>=68" wheel)  # the sdist's build requirements (pip builds it in isolation)
PLAT=($("$HOSTPY" -c 'from tests.artifacts import AARCH64_PLATFORMS as a; print(*a)')
      --python-version "$PYV" --implementation cp --only-binary=:all:)
"$HOSTPY" -m pip download -q "${PLAT[@]}" -d "$WHEELS" "${DEPARR[@]}" 2> >(grep -v "^WARNING: Location" >&2)
cp "${ASCEND_WHEELS[@]}" "$WHEELS/"

# 3. the service's venv (/opt/vllm) and the doctor's (/opt/doctor), installed by arm64 pip
rm -rf "$ROOT/opt/vllm" "$ROOT/opt/doctor" "$ROOT/wheels"
mkdir -p "$ROOT/wheels"
cp "$WHEELS"/*.whl "$WHEELS"/*.tar.gz "$ROOT/wheels/"
step "venvs inside the userland (arm64 python3 -m venv / pip under qemu)"
chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  /usr/bin/python3 -m venv /opt/vllm
chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root PIP_DISABLE_PIP_VERSION_CHECK=1 \
  /opt/vllm/bin/pip install -q --no-compile --no-index --no-deps "${ASCEND_WHEELS[@]/#*\//\/wheels\/}"
step "the doctor from its sdist, C scanners built by arm64 gcc (pip under qemu)"
chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  /usr/bin/python3 -m venv /opt/doctor
chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root PIP_DISABLE_PIP_VERSION_CHECK=1 \
  /opt/doctor/bin/pip install -q --no-index --find-links /wheels "/wheels/$(basename "$WHEELS"/ascend_doctor-*.tar.gz)"
rm -rf "$ROOT/wheels"

# 4. the cache, by the userland's own ldconfig (arm64, under qemu)
step "ldconfig (arm64) inside the userland"
chroot "$ROOT" /sbin/ldconfig
printf '%s' "$STAMP_WANT" >"$ROOT/.ascend-doctor-stamp"
step "done: $ROOT ($(du -sh "$ROOT" | cut -f1))"
