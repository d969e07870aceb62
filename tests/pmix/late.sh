#!/bin/bash
# Jobs started after iofs attached are picked up: one from the control FIFO
# after a first job ended, one by the host's --job ... --after timer.  The
# ranks wait a second before printing: output a rank writes before iofs has
# registered its pull reaches iofs only through libpmix 4.2.2's replay,
# which can arrive after the rank ended (docs/pmix.md, "output before the
# pull"); this case is about picking the jobs up.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/pmix/common.sh"

start_host --job "timed:2:sleep 1; echo timed \$PMIX_RANK" --after 3
start_pmix_daemon
[ ! -e "$MNT/timed" ] || fail "timed job already there before its start"

host_cmd "job first:1:sleep 1; echo first"
wait_for 20 job_done first || fail "first job not picked up"
assert_eq "first output" first "$(cat "$MNT/first/0/stdout")"

host_cmd "job second:3:sleep 1; printf 'second %s' \$PMIX_RANK; exit \$PMIX_RANK"
wait_for 20 job_done second || fail "second job (started after the first ended) not picked up"
for r in 0 1 2; do
	got=$(cat "$MNT/second/$r/stdout")
	[ "$got" = "second $r" ] || fail "second rank $r: got '$got'; info: $(cat "$MNT/second/$r/info" | tr '\n' ' ')"
	assert_eq "second rank $r status" "$r" "$(info_get "$MNT/second/$r/info" exit_status)"
done

# a namespace that cannot be a directory name is ignored, with a message
host_cmd "job bad/name:1:sleep 2"
host_cmd "job afterbad:1:sleep 1; echo fine"
wait_for 20 job_done afterbad || fail "job after a bad namespace not picked up"
assert_eq "afterbad output" fine "$(cat "$MNT/afterbad/0/stdout")"
wait_for 10 grep -q "ignoring namespace .bad/name." "$T/iofs.log" || fail "no message for the bad namespace"
daemon_alive || fail "daemon died on a bad namespace"

wait_for 20 job_done timed || fail "timed job not picked up"
for r in 0 1; do
	assert_eq "timed rank $r" "timed $r" "$(cat "$MNT/timed/$r/stdout")"
done
# listed by several queries while it ran: said once
assert_eq "bad namespace messages" 1 "$(grep -c "ignoring namespace" "$T/iofs.log")"
assert_eq "jobs" "afterbad first second timed" "$(ls "$MNT" | sort | xargs)"
stop_daemon
log "ok: 4 jobs after attach, a bad namespace ignored"
