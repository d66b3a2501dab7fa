#!/usr/bin/env bash
# stage.sh NAME CMD...: runs CMD, then prints how long the stage took and how it ended, so that a
# CI log says where its time goes (make test, .ci/run).
name=$1
shift
t0=$(date +%s)
"$@"
rc=$?
echo "stage $name: $(($(date +%s) - t0))s$([ "$rc" = 0 ] || echo ", FAILED (exit $rc)")"
exit "$rc"
