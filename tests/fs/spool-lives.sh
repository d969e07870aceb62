#!/bin/bash
# Many daemon lives on one spool under caps that change between them, each
# ended by kill -9 or SIGTERM while jobs run and resume on the next; every
# job's files are read after every start (tests/fs/spool_lives.py says
# what is checked).  Three fixed seeds of six lives.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"
id nobody >/dev/null 2>&1 || fail "no user nobody"
chmod 755 "$T" # some jobs are nobody's: it runs copies made in $T
for seed in 1 2 3; do
	python3 "$IOFS_SOURCE_DIR/tests/fs/spool_lives.py" "$T" "$IOFS_BUILD_DIR" "$seed" 6 >"$T/lives.out" 2>&1
	rc=$?
	sed "s/^/[$TEST_NAME] /" "$T/lives.out" >&2
	if [ $rc -ne 0 ]; then
		log "daemon log (last 20 lines):"
		tail -n 20 "$T/lives.log" >&2
		fail "seed $seed: $(tail -n 1 "$T/lives.out")"
	fi
	grep -q "^seed $seed: " "$T/lives.out" || fail "seed $seed: no summary"
done
log ok
