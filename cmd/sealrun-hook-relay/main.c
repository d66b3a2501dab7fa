/*
 * sealrun-hook-relay is the createRuntime hook of sealrun containers where it is installed
 * beside sealrun-netns-hook: the runtime runs it (as root, on the host) after creating a
 * container's namespaces and before starting its process, with the container's state on stdin.
 *
 *   sealrun-hook-relay SOCKET ROLE GATEWAY-NETNS EVIDENCE-FILE CGROUP-PATH
 *
 * It hands the four hook arguments (each ended by a NUL) and the state to the sealrun process
 * that started the container, listening on the abstract unix socket SOCKET, which configures and
 * checks the container's network namespace exactly as sealrun-netns-hook would
 * (sandbox/hookrelay_linux.go, netnshook.Handle), and it exits 0 only when that process answers
 * "ok"; any other answer is printed and the runtime does not start the container. It talks only
 * to a peer running as root. It exists because it starts in a fraction of the time the Go hook
 * takes, and every container start waits for the hook (make bench's runtime-ms).
 *
 * Built static (make build).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define STATE_MAX (1 << 20) /* netnshook.MaxState */
#define REPLY_MAX (64 << 10)

static int fail(const char *what) {
	fprintf(stderr, "sealrun network hook (relay): %s: %s\n", what, strerror(errno));
	return 1;
}

/* DEADLINE bounds the relay's whole life (netnshook.Deadline): sealrun gives crun no hook
 * time-out (crun can lose a hook's exit while it waits with one), so the relay ends itself.
 * SEALRUN_HOOK_DEADLINE (1 to 60 seconds) shortens it for a test. */
#define DEADLINE 25

static void on_alarm(int sig) {
	static const char msg[] = "sealrun network hook (relay): no answer within its deadline; the container is not started\n";
	(void)sig;
	(void)!write(2, msg, sizeof msg - 1);
	_exit(1);
}

static int write_all(int fd, const char *p, size_t n) {
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int main(int argc, char **argv) {
	if (argc != 6) {
		fprintf(stderr, "usage: sealrun-hook-relay SOCKET ROLE GATEWAY-NETNS EVIDENCE-FILE CGROUP-PATH "
		                "(the runtime runs it; it is no command for people)\n");
		return 2;
	}
	unsigned deadline = DEADLINE;
	const char *d = getenv("SEALRUN_HOOK_DEADLINE");
	if (d != NULL) {
		char *end;
		long v = strtol(d, &end, 10);
		if (*d != '\0' && *end == '\0' && v >= 1 && v <= 60)
			deadline = (unsigned)v;
	}
	struct sigaction sa = {.sa_handler = on_alarm};
	sigaction(SIGALRM, &sa, NULL);
	alarm(deadline);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	size_t n = strlen(argv[1]);
	if (n == 0 || n + 1 > sizeof addr.sun_path) {
		fprintf(stderr, "sealrun network hook (relay): socket name of %zu bytes\n", n);
		return 2;
	}
	memcpy(addr.sun_path + 1, argv[1], n); /* abstract: a leading NUL, no trailing one */
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return fail("socket");
	if (connect(s, (struct sockaddr *)&addr, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0) {
		fprintf(stderr, "sealrun network hook (relay): connect to @%s: %s (the sealrun process that started this container is gone?)\n", argv[1], strerror(errno));
		return 1;
	}
	struct ucred cred;
	socklen_t len = sizeof cred;
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		return fail("peer credentials");
	if (cred.uid != 0) {
		fprintf(stderr, "sealrun network hook (relay): @%s is served by uid %u, not root: refused\n", argv[1], cred.uid);
		return 1;
	}
	for (int i = 2; i < 6; i++)
		if (write_all(s, argv[i], strlen(argv[i]) + 1) != 0)
			return fail("send arguments");
	static char buf[64 << 10];
	size_t total = 0;
	for (;;) {
		ssize_t r = read(0, buf, sizeof buf);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return fail("read the container state");
		}
		if (r == 0)
			break;
		total += (size_t)r;
		if (total > STATE_MAX) {
			fprintf(stderr, "sealrun network hook (relay): container state over %d bytes\n", STATE_MAX);
			return 1;
		}
		if (write_all(s, buf, (size_t)r) != 0)
			return fail("send the container state");
	}
	if (shutdown(s, SHUT_WR) != 0)
		return fail("shutdown");
	static char reply[REPLY_MAX + 1];
	size_t got = 0;
	while (got < REPLY_MAX) {
		ssize_t r = read(s, reply + got, REPLY_MAX - got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return fail("read the answer");
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	reply[got] = '\0';
	if (got == 2 && memcmp(reply, "ok", 2) == 0)
		return 0;
	if (got == 0) {
		fprintf(stderr, "sealrun network hook (relay): no answer from @%s\n", argv[1]);
		return 1;
	}
	fprintf(stderr, "sealrun network hook: %s\n", reply);
	return 1;
}
