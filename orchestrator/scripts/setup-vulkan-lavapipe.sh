#!/usr/bin/env bash
# Vulkan on machines without a GPU: Mesa's lavapipe (llvmpipe device), from Debian packages.
#
# Debian 13 (trixie) and later: the suite's own packages are enough.
# Debian 12 (bookworm): its libvulkan-dev 1.3.239 cannot compile ggml-vulkan ('LayerSettingEXT'
# is not a member of 'vk') and its Mesa 22.3.6 lavapipe crashes in test-opt (double free), so
# Vulkan headers 1.4.x and spirv-headers come from trixie and Mesa 25.0.7 from
# bookworm-backports, unpacked (apt-get download + dpkg -x) into a private prefix under the
# tool's cache. The system's apt sources and installed packages are left as Debian 12 has them
# (Mesa 22.3.6 stays the system ICD), so nothing else on the machine changes.
#
# Writes $GGML_PATCH_CACHE/vulkan-sdk/env.json, which ggml-patch's vulkan backend reads:
# CMake flags, the test environment (VK_ICD_FILENAMES -> a private ICD json with an absolute
# library path) and what was installed. Idempotent: a second run downloads nothing.
#
# Usage: orchestrator/scripts/setup-vulkan-lavapipe.sh [--check]   (--check: report only, change nothing)
set -euo pipefail

CACHE="${GGML_PATCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ggml-patch}"
SDK="$CACHE/vulkan-sdk"
ENV_FILE="$SDK/env.json"
CHECK=0
[ "${1:-}" = "--check" ] && CHECK=1

say() { echo "setup-vulkan-lavapipe: $*"; }
first() { [ -e "$1" ] && echo "$1"; true; }  # the first match of a glob, or nothing
die() { echo "setup-vulkan-lavapipe: error: $*" >&2; exit 1; }

[ -r /etc/debian_version ] || die "not a Debian system (no /etc/debian_version); install Vulkan headers >= 1.4, spirv-headers, glslc and Mesa's lavapipe >= 25 yourself"
. /etc/os-release
DEBIAN_VERSION="$(cat /etc/debian_version)"
CODENAME="${VERSION_CODENAME:-}"
case "$CODENAME" in
    bookworm) MODE=private ;;
    trixie|forky|sid) MODE=system ;;
    # Ubuntu 24.04+ (GitHub's ubuntu-24.04 runners): Vulkan headers 1.3.275+, Mesa 24+ lavapipe,
    # glslc in the archive. Not measured on this project's machines (Debian), only on CI runners.
    noble|oracular|plucky|questing) MODE=system ;;
    *) die "'$CODENAME' ($DEBIAN_VERSION) is not supported: Debian 12 (bookworm), 13 (trixie) or Ubuntu 24.04+ expected" ;;
esac
ARCH="$(dpkg --print-architecture)"
MULTIARCH="$(gcc -print-multiarch 2>/dev/null || true)"
[ -n "$MULTIARCH" ] || MULTIARCH="$(uname -m)-linux-gnu"
say "Debian $DEBIAN_VERSION ($CODENAME, $ARCH): $([ $MODE = private ] && echo "suite packages + trixie headers and bookworm-backports Mesa in $SDK" || echo "the suite's own packages")"

# ---- system packages ----
SYSTEM_PKGS=(libvulkan1 glslc vulkan-tools mesa-vulkan-drivers)
# On Debian 12, mesa-vulkan-drivers (22.3.6) is installed for its runtime dependencies (the X/
# Wayland/LLVM 15 libraries the backports lavapipe links too) and as the system ICD that shows
# the pre-existing crash.
[ $MODE = system ] && SYSTEM_PKGS+=(libvulkan-dev spirv-headers)

installed_version() { dpkg-query -W -f='${db:Status-Status} ${Version}' "$1" 2>/dev/null | awk '$1=="installed"{print $2}'; }

MISSING=()
for p in "${SYSTEM_PKGS[@]}"; do
    [ -n "$(installed_version "$p")" ] || MISSING+=("$p")
done
if [ ${#MISSING[@]} -eq 0 ]; then
    say "system packages already installed: ${SYSTEM_PKGS[*]}"
elif [ $CHECK = 1 ]; then
    die "missing system packages: ${MISSING[*]} (run this script without --check, as root)"
else
    SUDO=()
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || die "missing system packages: ${MISSING[*]}; run this script as root"
        SUDO=(sudo)
    fi
    say "installing system packages: ${MISSING[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update -qq || say "apt-get update failed; trying the package lists already there"
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${MISSING[@]}" >/dev/null
fi
for p in "${SYSTEM_PKGS[@]}"; do say "  $p $(installed_version "$p")"; done

# (awk reads to the end rather than `exit`: an early exit would SIGPIPE the writer, fatal under pipefail)
LOADER="$(ldconfig -p | awk -v a="$MULTIARCH" '/libvulkan\.so\.1 / && $NF ~ a && !f {print $NF; f=1}')"
[ -n "$LOADER" ] || LOADER="$(ldconfig -p | awk '/libvulkan\.so\.1 / && !f {print $NF; f=1}')"
[ -n "$LOADER" ] || die "libvulkan.so.1 not found after installing libvulkan1"

# ---- Debian 12: the private prefix ----
# package/suite pairs unpacked into $SDK/root; libdrm from backports because Mesa 25 needs >= 2.4.121
PRIVATE_PKGS=(libvulkan-dev/trixie spirv-headers/trixie
              mesa-vulkan-drivers/bookworm-backports libdrm2/bookworm-backports libdrm-amdgpu1/bookworm-backports)
ROOT="$SDK/root"
APT_DIR="$SDK/apt"
APT_OPTS=(-o "Dir::Etc::SourceList=$APT_DIR/sources.list" -o "Dir::Etc::SourceParts=$APT_DIR/none"
          -o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::Cache::archives=$APT_DIR/archives"
          -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "APT::Sandbox::User=$(id -un)"
          -o "Debug::NoLocking=1")

private_prefix() {
    local stamp="$SDK/installed.txt" want=() p name suite ver
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/archives/partial" "$APT_DIR/none" "$SDK/debs"
    cat > "$APT_DIR/sources.list" <<EOF
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-backports main
EOF
    if [ -f "$stamp" ] && [ -d "$ROOT" ] && [ -z "${GGML_PATCH_VULKAN_REFRESH:-}" ]; then
        say "private prefix already unpacked ($stamp):"
        sed 's/^/setup-vulkan-lavapipe:   /' "$stamp"
        return
    fi
    [ $CHECK = 1 ] && die "the private prefix $ROOT is not set up (run this script without --check)"
    say "fetching package lists for trixie and bookworm-backports into $APT_DIR (the system's apt is untouched)"
    apt-get "${APT_OPTS[@]}" update -qq
    for p in "${PRIVATE_PKGS[@]}"; do
        name="${p%/*}"; suite="${p#*/}"
        ver="$(apt-cache "${APT_OPTS[@]}" show "$p" 2>/dev/null | awk '/^Version:/ && !f {print $2; f=1}')"
        [ -n "$ver" ] || die "$name is not in $suite (apt-cache show $p found nothing)"
        want+=("$name=$ver")
    done
    say "downloading: ${want[*]}"
    (cd "$SDK/debs" && apt-get "${APT_OPTS[@]}" download -qq "${want[@]}")
    rm -rf "$ROOT.new"
    mkdir -p "$ROOT.new"
    : > "$stamp.new"
    for w in "${want[@]}"; do
        name="${w%%=*}"; ver="${w#*=}"
        deb="$(ls "$SDK/debs/${name}_${ver/*:/}_"*.deb)"
        dpkg -x "$deb" "$ROOT.new"
        echo "$name $ver" >> "$stamp.new"
    done
    # only lavapipe is wanted: the GPU drivers (intel, radeon, ...) are 90 MB of nothing here
    find "$ROOT.new/usr/lib" -name 'libvulkan_*.so' ! -name 'libvulkan_lvp.so' -delete
    find "$ROOT.new/usr/share/vulkan/icd.d" -name '*.json' ! -name 'lvp_icd*' -delete
    rm -rf "$ROOT" "$SDK/debs"
    mv "$ROOT.new" "$ROOT"
    mv "$stamp.new" "$stamp"
    say "unpacked into $ROOT:"
    sed 's/^/setup-vulkan-lavapipe:   /' "$stamp"
}

LIB_DIR="/usr/lib/$MULTIARCH"
if [ $MODE = private ]; then
    private_prefix
    LIB_DIR="$ROOT/usr/lib/$MULTIARCH"
    ICD_SRC="$(first "$ROOT"/usr/share/vulkan/icd.d/lvp_icd*.json)"
    ICD="$SDK/lvp_icd.json"
    # the packaged json names the library by file name only; the loader would then find the
    # system's lavapipe (22.3.6), so the private one is named by its absolute path
    python3 - "$ICD_SRC" "$ICD" "$LIB_DIR/libvulkan_lvp.so" <<'EOF'
import json, sys
src, dst, lib = sys.argv[1:]
data = json.load(open(src))
data["ICD"]["library_path"] = lib
open(dst, "w").write(json.dumps(data, indent=2) + "\n")
EOF
    say "private ICD: $ICD -> $LIB_DIR/libvulkan_lvp.so"
    CMAKE_FLAGS=("-DVulkan_INCLUDE_DIR=$ROOT/usr/include" "-DVulkan_LIBRARY=$LOADER"
                 "-DSPIRV-Headers_DIR=$ROOT/usr/share/cmake/SPIRV-Headers")
    TEST_LD_PATH="$LIB_DIR"
    MESA_VERSION="$(awk '$1=="mesa-vulkan-drivers"{print $2}' "$SDK/installed.txt")"
else
    mkdir -p "$SDK"
    ICD="$(first /usr/share/vulkan/icd.d/lvp_icd*.json)"
    CMAKE_FLAGS=()
    TEST_LD_PATH=""
    MESA_VERSION="$(installed_version mesa-vulkan-drivers)"
fi
SYSTEM_ICD="$(first /usr/share/vulkan/icd.d/lvp_icd*.json)"

# ---- check: the loader sees one llvmpipe device through the chosen ICD ----
SUMMARY="$(env VK_ICD_FILENAMES="$ICD" ${TEST_LD_PATH:+LD_LIBRARY_PATH="$TEST_LD_PATH"} vulkaninfo --summary 2>&1 || true)"
DEVICE="$(printf '%s\n' "$SUMMARY" | awk -F'= ' '/deviceName/ && !f {print $2; f=1}')"
DRIVER="$(printf '%s\n' "$SUMMARY" | awk -F'= ' '/driverInfo/ && !f {print $2; f=1}')"
case "$DEVICE" in
    llvmpipe*) say "vulkaninfo: $DEVICE, driver $DRIVER" ;;
    *) printf '%s\n' "$SUMMARY" | tail -20 >&2; die "vulkaninfo found no llvmpipe device through $ICD" ;;
esac
GLSLC_VERSION="$(glslc --version 2>/dev/null | awk 'NR==1')"

[ $CHECK = 1 ] && { say "check passed ($ENV_FILE)"; exit 0; }
python3 - "$ENV_FILE" "$DEBIAN_VERSION" "$CODENAME" "$MODE" "$ICD" "$SYSTEM_ICD" "$TEST_LD_PATH" \
        "$MESA_VERSION" "$DEVICE" "$DRIVER" "$GLSLC_VERSION" "${CMAKE_FLAGS[@]}" <<'EOF'
import json, os, sys
(path, debian, codename, mode, icd, system_icd, ld_path, mesa, device, driver, glslc, *flags) = sys.argv[1:]
env = {"VK_ICD_FILENAMES": icd}
if ld_path:
    env["LD_LIBRARY_PATH"] = ld_path
data = {"schema_version": 1, "debian": debian, "codename": codename, "mode": mode,
        "cmake_flags": flags, "env": env, "icd": icd, "system_icd": system_icd or None,
        "mesa": mesa, "device": device, "driver": driver, "glslc": glslc}
tmp = path + ".tmp"
with open(tmp, "w") as f:
    f.write(json.dumps(data, indent=2) + "\n")
os.replace(tmp, path)
EOF
say "wrote $ENV_FILE"
