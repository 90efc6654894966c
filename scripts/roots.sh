#!/usr/bin/env bash
# scripts/roots.sh — builds the minimal Debian roots the distro matrix
# (tests/integration/test_distros.sh) runs in, with debootstrap from the
# Debian mirror of this machine's own apt sources (no host is written here):
#   trixie:   Python 3.13 + python3-torch 2.6 (glibc 2.41); opprof's bookworm
#             build is bind-mounted into it;
#   bullseye: Python 3.9 + python3-torch 1.7 (glibc 2.31, gcc 10), with
#             opprof's build dependencies: opprof is built inside it;
#   sid:      Python 3.14 (no torch); opprof's bookworm build is bind-mounted.
#
# Usage: scripts/roots.sh [trixie] [bullseye] [sid]   (default: all three)
# The roots are kept outside the checkout, in OPPROF_ROOTS_DIR
# (/var/cache/opprof-roots), so a second run reuses them: a root whose marker
# file (.opprof-root, written last, naming the package list) matches is
# complete and kept; any other directory of that name is an interrupted or
# older build and is rebuilt. When a root cannot be built (not root, no
# debootstrap, no Debian mirror in the apt sources, no network, too little
# disk) the reason goes to OPPROF_ROOTS_DIR/NAME.unavailable, which the test
# prints as its SKIP reason; the exit status is then 1 (callers that only
# want the cache filled ignore it).
#
# Measured on a loaded 2-core VM: trixie ~2-4 min, 1.6 GB; bullseye ~5 min,
# 1.4 GB; sid ~1 min (55 s), 280 MB (see the commit log for the figures of
# each run).
set -uo pipefail

ROOTS_DIR=${OPPROF_ROOTS_DIR:-/var/cache/opprof-roots}
# Seconds one debootstrap may take before it counts as hung (a mirror that
# stops answering must not eat CI's 90 minutes).
DEBOOTSTRAP_LIMIT=${OPPROF_ROOTS_TIME_LIMIT:-900}
MARKER=.opprof-root

# Packages of each root: packages_of NAME prints what debootstrap installs
# (--include, comma-separated), extra_packages_of NAME what apt-get installs
# inside afterwards. bullseye's python3-torch goes through apt: its
# dependencies (OpenCV -> GTK -> dconf-service) need "default-dbus-session-bus
# | dbus-session-bus", a virtual alternative debootstrap cannot resolve
# ("dependency problems - leaving unconfigured"). The bullseye build list is
# what configure.ac asks for, without libomp (bullseye's omp-tools.h is LLVM
# 11's: opprof builds there without OMPT).
packages_of() {
    case "$1" in
    trixie) echo "python3-torch,libdw1t64,libelf1t64,libpfm4,libunwind8" ;;
    sid) echo "python3.14,libdw1t64,libelf1t64,libpfm4,libunwind8" ;;
    bullseye) echo "libdw1,libelf1,libpfm4,libunwind8,build-essential,autoconf,automake,libtool,pkg-config,make,libdw-dev,libelf-dev,libpfm4-dev,libunwind-dev,libcunit1-dev,zlib1g-dev" ;;
    *) return 1 ;;
    esac
}
extra_packages_of() {
    case "$1" in
    bullseye) echo "python3-torch" ;;
    *) echo "" ;;
    esac
}

# What the marker's first line says of a root built with the current lists.
root_id() {
    local extra
    extra=$(extra_packages_of "$1")
    echo "suite=$1 packages=$(packages_of "$1")${extra:+ then=$extra}"
}

log() { printf 'roots.sh: %s\n' "$*" >&2; }

# The Debian archive URL of the apt sources: the entry (deb822 or one-line)
# that serves this machine's own release codename, not -security/-updates.
debian_mirror() {
    local codename
    codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
    [ -n "$codename" ] || return 1
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        # deb822 stanzas are separated by blank lines.
        awk -v c="$codename" '
            BEGIN { RS = ""; FS = "\n" }
            {
                uris = ""; suites = ""; types = ""
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^URIs:/) { uris = $i; sub(/^URIs:[ \t]*/, "", uris) }
                    if ($i ~ /^Suites:/) { suites = " " $i " "; sub(/^ Suites:/, "", suites) }
                    if ($i ~ /^Types:/) types = $i
                }
                if (types ~ /deb( |$)/ && (" " suites " ") ~ ("[ \t]" c "[ \t]")) { split(uris, u, /[ \t]+/); print u[1]; exit }
            }' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        # deb [options] URL SUITE COMPONENTS...
        sed -e 's/\[[^]]*\]//' "$f" | awk -v c="$codename" '$1 == "deb" && $3 == c { print $2; exit }'
    done
}

unavailable() {
    local name=$1
    shift
    log "$name: $*"
    printf '%s\n' "$*" >"$ROOTS_DIR/$name.unavailable" 2>/dev/null || true
    return 1
}

# Anything mounted at or under DIR (a test killed before its trap ran)?
mounted_under() {
    awk -v d="$1" '$2 == d || index($2, d "/") == 1 { found = 1 } END { exit !found }' /proc/mounts
}

# install_inside DIR PACKAGES: apt-get install in the new root (from the
# mirror debootstrap wrote into its sources.list), with /proc mounted for the
# maintainer scripts and unmounted again whatever happens.
install_inside() {
    local dir=$1 pkgs=$2 st
    mount -t proc proc "$dir/proc" || return 1
    # shellcheck disable=SC2086
    timeout -k 30 "$DEBOOTSTRAP_LIMIT" chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $pkgs </dev/null
    st=$?
    chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin apt-get clean >/dev/null 2>&1
    umount "$dir/proc" || umount -l "$dir/proc"
    return $st
}

build_root() {
    local name=$1 mirror=$2
    local dir="$ROOTS_DIR/$name" pkgs want
    pkgs=$(packages_of "$name") || { log "unknown root $name"; return 1; }
    want=$(root_id "$name")
    if [ -f "$dir/$MARKER" ] && [ "$(head -n 1 "$dir/$MARKER")" = "$want" ]; then
        rm -f "$ROOTS_DIR/$name.unavailable"
        log "$name: reusing $dir ($(sed -n 2p "$dir/$MARKER"))"
        return 0
    fi
    if [ -e "$dir" ]; then
        # Never delete through a mount: rm -rf would empty the host's /proc,
        # /sys or the build dir bound there.
        if mounted_under "$dir"; then
            unavailable "$name" "$dir is incomplete and has mounts under it (umount -R $dir, then run scripts/roots.sh again)"
            return 1
        fi
        log "$name: $dir is incomplete or was built with other packages: rebuilding"
        rm -rf "$dir"
    fi
    local free_kb
    free_kb=$(df -Pk "$ROOTS_DIR" | awk 'NR == 2 { print $4 }')
    if [ "${free_kb:-0}" -lt $((4 * 1024 * 1024)) ]; then
        unavailable "$name" "less than 4 GB free in $ROOTS_DIR ($((free_kb / 1024)) MB): a root takes ~1.6 GB"
        return 1
    fi
    local start=$SECONDS tmp="$dir.partial"
    if mounted_under "$tmp"; then
        unavailable "$name" "$tmp has mounts under it (umount -R $tmp)"
        return 1
    fi
    rm -rf "$tmp"
    log "$name: debootstrap --variant=minbase $name from $mirror (log: $ROOTS_DIR/$name.log)"
    if ! timeout -k 30 "$DEBOOTSTRAP_LIMIT" debootstrap --variant=minbase --include="$pkgs" \
        "$name" "$tmp" "$mirror" </dev/null >"$ROOTS_DIR/$name.log" 2>&1; then
        local why
        why=$(grep -E '^(E|W): ' "$ROOTS_DIR/$name.log" | tail -n 2 | tr '\n' ' ')
        # debootstrap mounts /proc (and more) inside while it works.
        umount -R "$tmp" 2>/dev/null
        mounted_under "$tmp" || rm -rf "$tmp"
        unavailable "$name" "debootstrap of $name from $mirror failed after $((SECONDS - start)) s: ${why:-see $ROOTS_DIR/$name.log}"
        return 1
    fi
    umount -R "$tmp" 2>/dev/null
    local extra
    extra=$(extra_packages_of "$name")
    if [ -n "$extra" ] && ! install_inside "$tmp" "$extra" >>"$ROOTS_DIR/$name.log" 2>&1; then
        umount -R "$tmp" 2>/dev/null
        mounted_under "$tmp" || rm -rf "$tmp"
        unavailable "$name" "apt-get install $extra inside the $name root failed after $((SECONDS - start)) s: $(grep -E '^E: ' "$ROOTS_DIR/$name.log" | tail -n 2 | tr '\n' ' ')"
        return 1
    fi
    mv "$tmp" "$dir" || { unavailable "$name" "cannot rename $tmp to $dir"; return 1; }
    local size
    size=$(du -sh "$dir" 2>/dev/null | cut -f1)
    # Written last: only a root that got this far is ever reused.
    printf '%s\nbuilt %s in %d s, %s\n' "$want" "$(date -u +%Y-%m-%dT%H:%MZ)" $((SECONDS - start)) "$size" \
        >"$dir/$MARKER"
    rm -f "$ROOTS_DIR/$name.unavailable"
    log "$name: built in $((SECONDS - start)) s, $size"
}

main() {
    local names=("$@")
    [ ${#names[@]} -gt 0 ] || names=(trixie bullseye sid)
    mkdir -p "$ROOTS_DIR" 2>/dev/null
    if [ ! -d "$ROOTS_DIR" ] || [ ! -w "$ROOTS_DIR" ]; then
        log "cannot create or write $ROOTS_DIR (run as root, or set OPPROF_ROOTS_DIR)"
        return 1
    fi
    local n reason=""
    if [ "$(id -u)" -ne 0 ]; then
        reason="not root: debootstrap and the test's chroot need root"
    elif ! command -v debootstrap >/dev/null 2>&1 && [ ! -x /usr/sbin/debootstrap ]; then
        reason="debootstrap is not installed (apt-get install debootstrap)"
    fi
    local mirror=""
    if [ -z "$reason" ]; then
        mirror=$(debian_mirror | head -n 1)
        [ -n "$mirror" ] || reason="no Debian mirror serving this machine's release in /etc/apt/sources.list or /etc/apt/sources.list.d/"
    fi
    PATH=$PATH:/usr/sbin:/sbin
    # One builder at a time (CI and a developer's run on the same cache).
    exec 9>"$ROOTS_DIR/.lock"
    flock 9
    local status=0
    for n in "${names[@]}"; do
        if [ -n "$reason" ]; then
            # A complete root from an earlier run is still good.
            if [ -f "$ROOTS_DIR/$n/$MARKER" ] && [ "$(head -n 1 "$ROOTS_DIR/$n/$MARKER")" = "$(root_id "$n")" ]; then
                log "$n: reusing $ROOTS_DIR/$n"
                continue
            fi
            unavailable "$n" "$reason" || status=1
            continue
        fi
        build_root "$n" "$mirror" || status=1
    done
    return $status
}

main "$@"
