#!/bin/bash
# Killing the PMIx server (SIGKILL) marks the job's running ranks lost; iofs
# stays up, what it received stays readable, and it still exits cleanly.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/pmix/common.sh"

# the ranks outlive the killed host: they record their pids for cleanup
cat >"$T/rank.sh" <<RANK
echo \$\$ >$T/pid.\$PMIX_RANK
printf "before loss \$PMIX_RANK\nno newline \$PMIX_RANK"
exec sleep 600
RANK

start_host
start_pmix_daemon
host_cmd "job ns3:2:sh $T/rank.sh"
wait_for 20 test -e "$MNT/ns3/1/stdout" || fail "job ns3 did not appear"
for r in 0 1; do
	wait_for 10 test -s "$T/pid.$r" || fail "rank $r did not start"
	track "$(cat "$T/pid.$r")"
	wait_for 10 info_at_least ns3 $r stdout_bytes 26 ||
		fail "rank $r output not received"
done

kill -KILL "$HOST_PID"
wait "$HOST_PID" 2>/dev/null
wait_for 20 job_is ns3 lost || fail "job not marked lost (state $(job_state ns3))"
for r in 0 1; do
	assert_eq "rank $r state" lost "$(rank_state ns3 $r)"
	assert_eq "rank $r data" "$(printf "before loss $r\nno newline $r" | sha256sum | cut -d' ' -f1)" \
		"$(sha "$MNT/ns3/$r/stdout")"
done
grep -q "lost the PMIx server" "$T/iofs.log" || fail "no loss message in the daemon log"
daemon_alive || fail "daemon died with its PMIx server"
# writing stdin to a lost rank fails cleanly
if echo x >"$MNT/ns3/0/stdin" 2>/dev/null; then
	fail "stdin write to a lost rank succeeded"
fi
daemon_alive || fail "daemon died on a stdin write to a lost rank"
stop_daemon
log "ok: lost, data kept, clean exit"
