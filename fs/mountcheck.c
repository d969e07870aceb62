/* SPDX-License-Identifier: MIT */
/* Pre-mount checks with messages that say what to do. */
#include "fs/fs.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Undo the octal escapes of /proc/self/mountinfo (\040 for space...). */
static void unescape(char *s)
{
	char *o = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 4;
		} else {
			*o++ = *s++;
		}
	}
	*o = '\0';
}

/* The filesystem type mounted at @real, or false if none. */
static bool mounted_at(const char *real, char *fstype, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	bool found = false;

	if (!f)
		return false;
	while (!found && getline(&line, &cap, f) > 0) {
		char mnt[PATH_MAX + 1], type[256];
		char *sep = strstr(line, " - ");

		/* id parent maj:min root MOUNTPOINT opts ... - TYPE src */
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4096s", mnt) != 1 ||
		    sscanf(sep, " - %255s", type) != 1)
			continue;
		unescape(mnt);
		if (!strcmp(mnt, real)) {
			snprintf(fstype, len, "%s", type);
			found = true;
		}
	}
	free(line);
	fclose(f);
	return found;
}

bool fs_fuse_mounted_at(const char *real)
{
	char type[256];

	return mounted_at(real, type, sizeof(type)) &&
	       !strncmp(type, "fuse", 4);
}

int fs_check_mountpoint(const char *path, char *err, size_t errlen)
{
	struct stat st;
	char real[PATH_MAX], type[256];

	/* Other users mount through the setuid fusermount3, which opens the
	 * device itself: only its existence matters for them. */
	if (stat("/dev/fuse", &st) != 0 ||
	    (geteuid() == 0 && access("/dev/fuse", R_OK | W_OK) != 0)) {
		int e = errno;

		snprintf(err, errlen,
			 "/dev/fuse: %s: load the fuse module (modprobe fuse), "
			 "install fuse3, or in a container pass --device "
			 "/dev/fuse",
			 strerror(e));
		return -e;
	}
	/* fusermount3 opens the device with the caller's own rights. */
	if (geteuid() != 0 && access("/dev/fuse", R_OK | W_OK) != 0) {
		int e = errno;
		struct passwd *pw = getpwuid(geteuid());

		snprintf(err, errlen,
			 "/dev/fuse (mode %04o) is not readable and writable "
			 "by %s: ask the administrator to make it 0666 "
			 "(chmod 0666 /dev/fuse, the fuse3 default), or mount "
			 "as root",
			 (unsigned)(st.st_mode & 07777),
			 pw ? pw->pw_name : "this user");
		return -e;
	}
	if (stat(path, &st) != 0) {
		int e = errno;

		if (e == ENOTCONN)
			snprintf(
			    err, errlen,
			    "%s is a stale FUSE mount (its daemon died): run "
			    "'fusermount3 -u %s' (or 'umount -l %s') first",
			    path, path, path);
		else if (e == ENOENT)
			snprintf(
			    err, errlen,
			    "mountpoint %s does not exist: create it first "
			    "(mkdir -p %s)",
			    path, path);
		else
			snprintf(err, errlen, "mountpoint %s: %s", path,
				 strerror(e));
		return -e;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen,
			 "mountpoint %s is not a directory: give an empty "
			 "directory",
			 path);
		return -ENOTDIR;
	}
	if (!realpath(path, real)) {
		int e = errno;

		snprintf(err, errlen, "mountpoint %s: %s", path, strerror(e));
		return -e;
	}
	if (mounted_at(real, type, sizeof(type))) {
		snprintf(err, errlen,
			 "%s is already a mount point (%s): unmount it first "
			 "(fusermount3 -u %s) or choose another directory",
			 real, type, real);
		return -EBUSY;
	}
	return 0;
}

bool fs_path_inside(const char *mount_abs, const char *path)
{
	char buf[PATH_MAX], real[PATH_MAX], full[2 * PATH_MAX + 2];
	const char *rest = "";
	size_t n = strlen(mount_abs);
	char *slash;

	if (strlen(path) >= sizeof(buf))
		return false;
	strcpy(buf, path);
	/* Resolve the longest existing prefix, keep the rest as written. */
	while (!realpath(buf[0] ? buf : ".", real)) {
		if (!buf[0])
			return false; /* not even the cwd resolves */
		slash = strrchr(buf, '/');
		if (!slash) {
			rest = path;
			buf[0] = '\0';
			continue;
		}
		if (slash == buf) {
			strcpy(real, "/");
			rest = path + 1;
			break;
		}
		*slash = '\0';
		rest = path + (slash - buf) + 1;
	}
	snprintf(full, sizeof(full), "%s%s%s", real,
		 rest[0] && strcmp(real, "/") ? "/" : "", rest);
	if (n == 1 && mount_abs[0] == '/')
		return true;
	return !strncmp(full, mount_abs, n) &&
	       (full[n] == '\0' || full[n] == '/');
}
