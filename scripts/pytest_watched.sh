#!/usr/bin/env bash
# Usage: bash scripts/pytest_watched.sh REPORT CMD...
# Runs CMD (a pytest run that writes its junit REPORT at the end of its session) and watches it:
# a process still running 20 s after it wrote REPORT hangs at exit (its tests are over).  Then
# each of its threads is printed (name, kernel wait channel, system call and kernel stack where
# readable, and native stacks where gdb is installed: which thread waits on what) and it is killed;
# the exit status is then 125.  Otherwise CMD's own exit status.  A TERM kills CMD too.
set -u
report=$1
shift
rm -f "$report"
"$@" &
pid=$!
trap 'kill -9 $pid 2>/dev/null; exit 143' TERM INT
while kill -0 "$pid" 2>/dev/null; do
  if [ -s "$report" ]; then
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "HUNG AT EXIT: the session ended (its report was written) 20 s ago; the process's threads:"
      for t in /proc/"$pid"/task/*; do
        echo "  tid $(basename "$t") $(cat "$t"/comm 2>/dev/null) state=$(cut -d' ' -f3 "$t"/stat 2>/dev/null) wchan=$(cat "$t"/wchan 2>/dev/null) syscall=$(cut -d' ' -f1-3 "$t"/syscall 2>/dev/null)"
        head -8 "$t"/stack 2>/dev/null | sed 's/^/      /'
      done
      if command -v gdb >/dev/null 2>&1; then
        echo "native stacks (gdb):"
        timeout 60 gdb -p "$pid" -batch -ex "thread apply all bt 12" 2>&1 | grep -E '^(Thread|#)' | head -200
      fi
      kill -9 "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      exit 125
    fi
    break
  fi
  sleep 1
done
wait "$pid"
