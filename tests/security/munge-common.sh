# MUNGE helpers for the security suite: a private munged with a generated
# key in $T (stopped by pid at cleanup), and credentials minted for the
# HELLO payload of net/auth.c.  Source after tests/security/common.sh.
command -v munged >/dev/null && command -v munge >/dev/null ||
	fail "munged/munge missing: scripts/setup installs the munge package"
HELLO_CRED=(/usr/bin/python3 "$IOFS_SOURCE_DIR/tests/security/hello-cred.py")

# start_munged NAME: munged with its own key in $T/NAME; sets MSOCK_NAME
start_munged() {
	local d=$T/$1
	mkdir -m 755 -p "$d"
	dd if=/dev/urandom of="$d/key" bs=128 count=1 status=none
	chmod 600 "$d/key"
	munged -F -f --key-file="$d/key" --socket="$d/sock" --pid-file="$d/pid" \
		--log-file="$d/log" --seed-file="$d/seed" >"$d/out" 2>&1 &
	track $!
	eval "MPID_$1=$!"
	wait_for 10 test -S "$d/sock" || fail "munged $1 did not start: $(cat "$d/out")"
	eval "MSOCK_$1=$d/sock"
}

# mint SOCK NSPACE BASE COUNT OUT [munge options...]: a credential whose
# payload binds NSPACE and ranks BASE+COUNT with a fresh nonce (auth.c)
mint() {
	local sock=$1 ns=$2 base=$3 count=$4 out=$5
	shift 5
	printf 'iofs-hello 1\nnspace=%s\nranks=%s+%s\nnonce=%s\n' "$ns" "$base" "$count" \
		"$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" |
		munge -S "$sock" "$@" >"$out" || fail "munge could not mint a credential"
}
