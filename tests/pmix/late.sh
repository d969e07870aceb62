#!/bin/bash
# Jobs started after iofs attached are picked up: one from the control FIFO
# after a first job ended, one by the host's --job ... --after timer.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/pmix/common.sh"

start_host --job "timed:2:echo timed \$PMIX_RANK" --after 3
start_pmix_daemon
[ ! -e "$MNT/timed" ] || fail "timed job already there before its start"

host_cmd "job first:1:echo first"
wait_for 20 job_done first || fail "first job not picked up"
assert_eq "first output" first "$(cat "$MNT/first/0/stdout")"

host_cmd "job second:3:printf 'second %s' \$PMIX_RANK; exit \$PMIX_RANK"
wait_for 20 job_done second || fail "second job (started after the first ended) not picked up"
for r in 0 1 2; do
	got=$(cat "$MNT/second/$r/stdout")
	[ "$got" = "second $r" ] || fail "second rank $r: got '$got'; info: $(cat "$MNT/second/$r/info" | tr '\n' ' ')"
	assert_eq "second rank $r status" "$r" "$(info_get "$MNT/second/$r/info" exit_status)"
done

wait_for 20 job_done timed || fail "timed job not picked up"
for r in 0 1; do
	assert_eq "timed rank $r" "timed $r" "$(cat "$MNT/timed/$r/stdout")"
done
assert_eq "jobs" "first second timed" "$(ls "$MNT" | sort | xargs)"
stop_daemon
log "ok: 3 jobs after attach"
