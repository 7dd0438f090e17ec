#!/bin/bash
# What a person waits for in the window, timed by the window's own log (docs/benchmarks.md §5, §14).
#
#   Xvfb :99 -screen 0 1920x1080x24 & DISPLAY=:99 openbox &
#   grep -E '^\| [0-9]+ \|' resources/demo/QUESTIONS.md | awk -F'|' '{print $3}' | sed 's/^ *//; s/ *$//' \
#       | DISPLAY=:99 bash scripts/walk_demo.sh 1280 800 en 0.3 40 /tmp/walk
#
# Arguments: width height UI-language(en|zh) pause-before-Enter(s) seconds-per-question screenshot-prefix.
# A fresh home, the app on the bundled demo (scripts/bootstrap.sh run), the window at width×height; each
# question from standard input typed with xdotool (120 ms a key, 250 ms for Chinese), Enter after the pause,
# a screenshot per question; then the log's lines "columns … after Enter", "first answer words … after
# Enter" and "read ahead: …", and the load average. Needs xdotool and imagemagick (import).
set -u
W=$1; H=$2; LANG_UI=$3; PAUSE=$4; PER=$5; OUT=$6
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HOME_DIR=$(mktemp -d)
if [ "$LANG_UI" = zh ]; then
  mkdir -p "$HOME_DIR/.config/rag-desktop"
  printf '[ui]\nlanguage = "zh"\n' > "$HOME_DIR/.config/rag-desktop/settings.toml"
fi
mapfile -t QUESTIONS
HOME=$HOME_DIR bash "$ROOT/scripts/bootstrap.sh" run > "$HOME_DIR/app.out" 2>&1 &
APP=$!
WID=""
for _ in $(seq 1 120); do
  WID=$(xdotool search --onlyvisible --name rag_desktop 2>/dev/null | head -1)
  [ -n "$WID" ] && break
  sleep 1
done
[ -n "$WID" ] || { echo "no window after 120 s; see $HOME_DIR/app.out" >&2; exit 1; }
sleep "${READY_S:-90}"  # the demo's first ingest and the model made ready
xdotool windowmove "$WID" 0 0 windowsize "$WID" "$W" "$H"
sleep 2
n=0
for Q in "${QUESTIONS[@]}"; do
  n=$((n + 1))
  xdotool windowactivate --sync "$WID"; sleep 0.3
  xdotool key ctrl+l; sleep 0.3
  xdotool key ctrl+a BackSpace; sleep 0.3
  DELAY=120
  echo "$Q" | grep -qP '[\x{4e00}-\x{9fff}]' && DELAY=250
  # a leading space absorbs the first key, which xdotool sometimes drops; it is deleted before Enter
  xdotool type --delay "$DELAY" " $Q"
  xdotool key Home Delete End
  sleep "$PAUSE"
  xdotool key Return
  sleep "$PER"
  import -window root "${OUT}_$n.png"
done
grep -E 'columns|first answer words|read ahead' "$HOME_DIR/.local/share/rag-desktop/logs/rag-desktop.log"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
kill "$APP" 2>/dev/null
pkill -f 'rag-desktop gui' 2>/dev/null
