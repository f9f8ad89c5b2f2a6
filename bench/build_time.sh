#!/usr/bin/env bash
# Where a clean build's CPU time goes: a fresh build folder with ccache off, every compile and
# link timed (user+sys CPU, wall, max RSS) through a compiler wrapper, then one incremental
# rebuild after touching a file. CPU time is the figure to compare on a shared machine (others'
# compiles stretch wall time); CPU / cores approximates the wall time on idle cores.
#
#   bench/build_time.sh [--build DIR] [--jobs N] [--top N] [--touch FILE]
#                       [--incremental "TARGET..."] [--targets "TARGET..."]
#
# Defaults: --build /tmp/ts-build-time, --jobs $(nproc), --top 25,
# --touch workers/zoo/families/bert.cc, --incremental "ts_zoo_static touchstone", all targets.
# Prints Markdown for bench/RESULTS.md; the raw per-step log stays in DIR/steps.log
# ("user sys wall maxrss_kb output" per compile or link).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=/tmp/ts-build-time
JOBS=$(nproc)
TOP=25
TOUCH=workers/zoo/families/bert.cc
INCREMENTAL="ts_zoo_static touchstone"
TARGETS=""
usage="usage: bench/build_time.sh [--build DIR] [--jobs N] [--top N] [--touch FILE] [--incremental TARGETS] [--targets TARGETS]"
while (($#)); do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --top) TOP=$2; shift 2 ;;
    --touch) TOUCH=$2; shift 2 ;;
    --incremental) INCREMENTAL=$2; shift 2 ;;
    --targets) TARGETS=$2; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
CXX=${CXX:-$(command -v g++)}
export CCACHE_DISABLE=1  # neither use nor fill the shared cache

rm -rf "$BUILD"
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
LOG=$BUILD/steps.log
# The wrapper is the C++ compiler CMake sees (it also links), so every step is logged whatever
# launcher the tree sets.
cat >"$BUILD/timed-cxx" <<EOF
#!/usr/bin/env bash
out=-; prev=
for a in "\$@"; do [[ \$prev == -o ]] && out=\$a; prev=\$a; done
exec /usr/bin/time -a -o "\${TS_STEP_LOG:-/dev/null}" -f "%U %S %e %M \$out" "$CXX" "\$@"
EOF
chmod +x "$BUILD/timed-cxx"

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTS_WERROR=ON \
  -DCMAKE_CXX_COMPILER="$BUILD/timed-cxx" >"$BUILD/configure.log"
: >"$LOG"
export TS_STEP_LOG=$LOG

# Whole build: CPU of cmake --build and every child (ninja waits for them all).
/usr/bin/time -o "$BUILD/total.time" -f "%e %U %S" \
  cmake --build "$BUILD" -j"$JOBS" ${TARGETS:+--target $TARGETS} >"$BUILD/build.log"
read -r wall user sys <"$BUILD/total.time"
steps=$(grep -c '' "$LOG")

# One incremental rebuild after touching a file, as a developer would.
: >"$BUILD/incremental.log"
TS_STEP_LOG=$BUILD/incremental.log
touch "$TOUCH"
/usr/bin/time -o "$BUILD/incremental.time" -f "%e %U %S" \
  cmake --build "$BUILD" -j"$JOBS" --target $INCREMENTAL >"$BUILD/incremental-build.log"
read -r iwall iuser isys <"$BUILD/incremental.time"

commit=$(git rev-parse --short HEAD 2>/dev/null || echo "(no git)")
git diff --quiet HEAD -- . 2>/dev/null || commit="$commit+changes"
awk -v wall="$wall" -v user="$user" -v sys="$sys" -v steps="$steps" -v jobs="$JOBS" \
    -v commit="$commit" -v top="$TOP" -v build="$BUILD/" '
  function kind(o) {
    if (o ~ /\.gch$/) return "precompiled headers";
    if (o ~ /\.o$/) return "compiles";
    return "links";
  }
  { cpu = $1 + $2; o = $5; sub("^" build, "", o); k = kind(o);
    total[k] += cpu; n[k]++; all += cpu;
    line[NR] = sprintf("| %s | %.1f | %.1f | %d |", o, cpu, $3, $4 / 1024); key[NR] = cpu }
  END {
    printf "Commit %s, %d jobs, ccache off: **%.1f min CPU** (user %.0f s + sys %.0f s), %.1f min wall, %d compiles and links.\n\n",
           commit, jobs, (user + sys) / 60, user, sys, wall / 60, steps;
    print "| steps | count | CPU s | share |";
    print "|---|---|---|---|";
    for (k in total) printf "| %s | %d | %.0f | %.0f%% |\n", k, n[k], total[k], 100 * total[k] / all;
    printf "\nThe %d heaviest steps:\n\n| output | CPU s | wall s | max RSS MiB |\n|---|---|---|---|\n", top;
    for (i = 1; i <= top && i <= NR; i++) {
      best = 0;
      for (j in key) if (!best || key[j] > key[best]) best = j;
      print line[best]; delete key[best];
    }
  }' "$LOG"
echo
printf 'Incremental: `touch %s`, `cmake --build --target %s`: %.1f s CPU, %.1f s wall, %d steps:\n\n' \
  "$TOUCH" "$INCREMENTAL" "$(awk -v u="$iuser" -v s="$isys" 'BEGIN { print u + s }')" "$iwall" \
  "$(grep -c '' "$BUILD/incremental.log")"
echo "| output | CPU s | wall s |"
echo "|---|---|---|"
awk -v build="$BUILD/" '{ o = $5; sub("^" build, "", o); printf "| %s | %.1f | %.1f |\n", o, $1 + $2, $3 }' \
  "$BUILD/incremental.log"
