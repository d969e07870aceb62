/* SPDX-License-Identifier: MIT */
/*
 * Address parsing and the documented default address.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/net_i.h"
#include "net/server.h"

const char *net_default_addr(void)
{
	static char buf[sizeof(((struct sockaddr_un *)0)->sun_path) + 8];
	const char *env = getenv("IOFS_ADDR");
	const char *xdg = getenv("XDG_RUNTIME_DIR");

	if (env && *env)
		snprintf(buf, sizeof(buf), "%s", env);
	else if (geteuid() == 0) /* never $XDG_RUNTIME_DIR: after su it may
				  * belong to someone else */
		snprintf(buf, sizeof(buf), "unix:%s", NET_SYSTEM_SOCKET);
	else if (xdg && *xdg)
		snprintf(buf, sizeof(buf), "unix:%s/iofs.sock", xdg);
	else
		snprintf(buf, sizeof(buf), "unix:/tmp/iofs-%u.sock",
			 (unsigned)getuid());
	return buf;
}

static bool is_socket(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

const char *net_default_connect_addr(void)
{
	/* The system daemon first (its directory is root's: nobody can
	 * plant a socket there), then the user's own guesses. */
	if (getenv("IOFS_ADDR") && *getenv("IOFS_ADDR"))
		return net_default_addr();
	if (is_socket(NET_SYSTEM_SOCKET))
		return "unix:" NET_SYSTEM_SOCKET;
	if (is_socket(NET_LEGACY_SOCKET))
		return "unix:" NET_LEGACY_SOCKET;
	return net_default_addr();
}

static int parse_unix(const char *path, struct net_addr *out, char *err,
		      size_t errlen)
{
	struct sockaddr_un *sun = (struct sockaddr_un *)&out->ss;
	size_t n = strlen(path);

	if (n == 0) {
		snprintf(err, errlen, "empty socket path in '%s'", out->text);
		return -EINVAL;
	}
	if (n >= sizeof(sun->sun_path)) {
		snprintf(err, errlen,
			 "socket path too long (%zu bytes, at most %zu): %s", n,
			 sizeof(sun->sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path, path, n + 1);
	out->family = AF_UNIX;
	out->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	return 0;
}

static int parse_tcp(const char *hp, struct net_addr *out, char *err,
		     size_t errlen)
{
	char host[256];
	const char *port;

	if (hp[0] == '[') {
		const char *end = strchr(hp, ']');
		if (!end || end[1] != ':' ||
		    (size_t)(end - hp - 1) >= sizeof(host))
			goto bad;
		memcpy(host, hp + 1, (size_t)(end - hp - 1));
		host[end - hp - 1] = '\0';
		port = end + 2;
	} else {
		const char *colon = strrchr(hp, ':');
		if (!colon || (size_t)(colon - hp) >= sizeof(host))
			goto bad;
		memcpy(host, hp, (size_t)(colon - hp));
		host[colon - hp] = '\0';
		port = colon + 1;
	}
	char *endp;
	errno = 0;
	long p = strtol(port, &endp, 10);
	if (!*port || *endp || errno || p < 0 || p > 65535)
		goto bad;

	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (rc != 0 || !res) {
		snprintf(err, errlen, "cannot resolve '%s': %s", host,
			 gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	memcpy(&out->ss, res->ai_addr, res->ai_addrlen);
	out->len = res->ai_addrlen;
	out->family = res->ai_family;
	freeaddrinfo(res);
	return 0;
bad:
	snprintf(err, errlen,
		 "bad TCP address '%s': expected tcp:HOST:PORT or "
		 "tcp:[V6ADDR]:PORT",
		 out->text);
	return -EINVAL;
}

int net_addr_parse(const char *s, struct net_addr *out, char *err,
		   size_t errlen)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->text, sizeof(out->text), "%s", s);
	if (strncmp(s, "unix:", 5) == 0)
		return parse_unix(s + 5, out, err, errlen);
	if (strncmp(s, "tcp:", 4) == 0)
		return parse_tcp(s + 4, out, err, errlen);
	if (s[0] == '/')
		return parse_unix(s, out, err, errlen);
	snprintf(err, errlen,
		 "bad address '%s': expected unix:/PATH or tcp:HOST:PORT", s);
	return -EINVAL;
}

bool net_sockaddr_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 =
		    (const struct sockaddr_in6 *)sa;
		if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return true;
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
			return in6->sin6_addr.s6_addr[12] == 127;
		return false;
	}
	return sa->sa_family == AF_UNIX;
}

void net_sockaddr_text(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 =
		    (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "unix");
	}
}

void net_tcp_tune(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int one = 1, idle = 5, intvl = 2, cnt = 3;
	unsigned int user_timeout_ms = 10000;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
		return;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms,
		   sizeof(user_timeout_ms));
}

unsigned long long net_proc_start(int pid)
{
	char path[64], buf[1024];
	unsigned long long start = 0;
	char state = 0;
	FILE *f;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* after "pid (comm) ": comm may hold spaces and parentheses */
	char *p = strrchr(buf, ')');
	if (!p || sscanf(p + 1,
			 " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
			 "%*d %*d %*d %*d %*d %*d %llu",
			 &state, &start) != 2)
		return 0;
	return state == 'Z' || state == 'X' ? 0 : start;
}

int net_eof_error(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int err = 0;
	socklen_t elen = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err)
		return err;
	/* A FIN from the peer leaves CLOSE_WAIT; TCP_CLOSE with no error
	 * left means the kernel ended it (a timeout or a reset) and a
	 * write took the error first. */
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
	    ti.tcpi_state == TCP_CLOSE)
		return ENOTCONN;
	return 0;
}

int net_write_error(int fd, int err)
{
	int why;

	if (err != EPIPE)
		return err;
	why = net_eof_error(fd);
	return why ? why : err;
}

void net_drop_reason(int err, char *buf, size_t len)
{
	if (err == 0)
		snprintf(buf, len, "connection closed by the peer");
	else if (err == ENOTCONN)
		snprintf(buf, len,
			 "connection ended by the kernel (timed out or reset: "
			 "the link or the peer is gone)");
	else if (err == ETIMEDOUT)
		snprintf(buf, len,
			 "connection timed out (TCP keepalive probes "
			 "unanswered, or sent data unacknowledged for the "
			 "TCP user timeout: the peer or the link is gone)");
	else if (err == EHOSTUNREACH || err == ENETUNREACH ||
		 err == EHOSTDOWN || err == ENETDOWN)
		/* a timeout too: the kernel reports the last routing error
		 * its probes met instead of ETIMEDOUT */
		snprintf(buf, len,
			 "peer unreachable: %s (keepalive probes or sent data "
			 "went unanswered: the link or the peer's host is "
			 "gone)",
			 strerror(err));
	else
		snprintf(buf, len, "connection error: %s", strerror(err));
}
