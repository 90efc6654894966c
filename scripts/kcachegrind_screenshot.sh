#!/bin/sh
# scripts/kcachegrind_screenshot.sh CALLGRIND_FILE OUT.png — opens an
# `opprof export --callgrind` file in KCachegrind under Xvfb and takes a
# screenshot of the screen after 15 s (docs/images/kcachegrind-known_split.png
# was made so). Needs Debian's kcachegrind, xvfb, dbus and imagemagick; not
# part of the test suite (KCachegrind pulls in KDE; callgrind_annotate checks
# the format in tests/integration/test_viewers.sh).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 CALLGRIND_FILE OUT.png" >&2; exit 2; }
in=$(readlink -f "$1")
out=$(readlink -m "$2")
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
cat >"$home/run.sh" <<EOS
#!/bin/sh
export HOME=$home XDG_RUNTIME_DIR=$home/run
mkdir -p \$XDG_RUNTIME_DIR \$HOME/.config && chmod 700 \$XDG_RUNTIME_DIR
printf '[TipOfDay]\nRunOnStart=false\n' >\$HOME/.config/kcachegrindrc
dbus-run-session -- kcachegrind -qwindowgeometry 1280x800+0+0 "$in" >"$home/kcachegrind.log" 2>&1 &
sleep 15
import -window root "$out"
pkill -f "kcachegrind -qwindowgeometry 1280x800+0+0 $in" || true
EOS
chmod +x "$home/run.sh"
timeout 90 xvfb-run -a -s "-screen 0 1280x800x24" "$home/run.sh"
echo "screenshot: $out"
