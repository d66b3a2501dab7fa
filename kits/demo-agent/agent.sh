#!/bin/sh
# scripted-demo: the scripted demo scaffold of sealrun. It is a shell script, not a model: it
# calls no model provider and decides nothing a model would. It does what a careful agent does
# with the ARI kit, so that a sealed run can be shown end to end on any machine:
#   read the brief; check the clock; train the starter through runner; bundle; submit; read the
#   validation score; try one improvement; submit again; promote the better by validation
#   score; finalize.
# Its choices vary with the run's seed (SEALRUN_SEED): the learning rate, and whether the
# improvement is more training of the same model or a larger model from scratch.
set -u
say() { echo "[scripted-demo] $*"; }
die() { say "giving up: $*"; exit 1; }

# seconds DURATION: a Go duration as runner prints it (1h2m3s, 4m05s, 12s, 0s) in whole seconds.
seconds() {
	echo "$1" | awk '{ s = 0; n = ""; for (i = 1; i <= length($0); i++) { c = substr($0, i, 1);
		if (c ~ /[0-9.]/) n = n c; else if (c == "h") { s += n * 3600; n = "" } else if (c == "m") { s += n * 60; n = "" } else if (c == "s") { s += n; n = "" } }
		printf "%d\n", s }'
}

# clock: sets LEFT and UNTIL_RESERVE (seconds) from runner time_left.
clock() {
	line=$(runner time_left 2>/dev/null) || die "runner time_left failed"
	say "clock: $line"
	LEFT=$(seconds "$(echo "$line" | sed -n 's/^\([0-9hms.]*\) left.*/\1/p')")
	UNTIL_RESERVE=$(seconds "$(echo "$line" | sed -n 's/.*reserve window starts in \([0-9hms.]*\).*/\1/p')")
	[ -n "$UNTIL_RESERVE" ] || UNTIL_RESERVE=0
}

# submit DIR: sets ID and PASSED from runner submit's answer.
submit() {
	out=$(runner submit "$1" 2>&1) || { echo "$out"; return 1; }
	echo "$out"
	ID=$(echo "$out" | sed -n 's/^candidate \([0-9a-f]*\) .*/\1/p' | head -n 1)
	PASSED=$(echo "$out" | sed -n 's/.*validation \([0-9]*\)\/[0-9]* .*/\1/p' | head -n 1)
	[ -n "$ID" ] || return 1
	[ -n "$PASSED" ] || PASSED=0
}

seed=${SEALRUN_SEED:-1}
say "seed $seed; agent identity ${SEALRUN_AGENT:-unknown}"
say "reading the brief ($(wc -l <"${SEALRUN_BRIEF:-BRIEF.md}") lines): $(head -n 1 "${SEALRUN_BRIEF:-BRIEF.md}")"
ls -l starter data validation.sealrun

case $((seed % 3)) in
0) lr=0.003 ;;
1) lr=0.004 ;;
*) lr=0.002 ;;
esac

clock
# A quarter of the time before the reserve window for each training call, at most 40 s here:
# a demo, not a benchmark attempt.
budget=$((UNTIL_RESERVE / 4))
[ "$budget" -gt 40 ] && budget=40
[ "$budget" -ge 10 ] || die "only ${UNTIL_RESERVE}s before the reserve window: no time to train"

say "training the starter: toy size, lr $lr, at most ${budget}s"
runner python3 starter/train.py --size toy --steps 5000 --lr "$lr" --seed "$seed" --max-seconds "$budget" --out ckpt1 ||
	die "the first training call failed"
sh starter/make_bundle.sh ckpt1 bundle1 || die "make_bundle failed"
submit bundle1 || die "the first submission was refused"
best=$ID best_passed=$PASSED
say "first candidate $best: $PASSED validation questions right"
runner promote "$best"

clock
budget=$((UNTIL_RESERVE / 3))
[ "$budget" -gt 40 ] && budget=40
if [ "$budget" -lt 10 ]; then
	say "not enough time before the reserve window for an improvement; finalizing $best"
	exec runner finalize "$best"
fi
if [ $((seed % 2)) -eq 1 ]; then
	say "improvement: train the same model longer (resume ckpt1, at most ${budget}s)"
	runner python3 starter/train.py --resume ckpt1/model.pt --steps 5000 --lr "$lr" --seed "$seed" --max-seconds "$budget" --out ckpt2
else
	say "improvement: a larger model from scratch (small size, at most ${budget}s)"
	runner python3 starter/train.py --size small --steps 5000 --lr "$lr" --seed "$seed" --max-seconds "$budget" --out ckpt2
fi
if [ -f ckpt2/weights.pt ] && sh starter/make_bundle.sh ckpt2 bundle2 && submit bundle2; then
	say "second candidate $ID: $PASSED validation questions right (first: $best_passed)"
	if [ "$PASSED" -gt "$best_passed" ]; then
		best=$ID
	fi
else
	say "the improvement failed; keeping $best"
fi
runner history
say "promoting $best (the better by validation score, ties to the first) and finalizing"
runner promote "$best"
exec runner finalize "$best"
