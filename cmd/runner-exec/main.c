/*
 * runner-exec is the first process of every compute call's runner container, mounted at
 * runner.ShimPath: `runner-exec _exec [--cwd DIR] [--] CMD [ARGS...]` changes to DIR as the
 * agent's user, makes stderr the same pipe as stdout (so the two keep their order), finds CMD
 * on the call's PATH and executes it in its own place.
 *
 * `runner-exec _await` is the same for a container started before its call (runner/warm_linux.go):
 * it reads the call from stdin, which only the runner service can write, until the service
 * closes it: fields each ended by a NUL, "C" and the directory, then "E" and KEY=VALUE for each
 * variable the call adds to the environment (set in order, a later one replacing an earlier,
 * as the runtime sets a spec's), then "A" and each argument (runner.EncodeCall). Anything else is
 * refused with status 2 before any of it is used. The command then reads end-of-file on stdin,
 * as a call's command always does.
 *
 * It does exactly what the static runner binary's `runner _exec` does (cmd/runner), which stays
 * the fallback where this binary is not installed beside it: the same messages, the same exit
 * statuses (125 cd failed, 126 not executable, 127 not found, 2 usage), the same PATH search
 * (Go's exec.LookPath: a regular file the caller may execute; a match in a relative PATH entry
 * is refused; no PATH means no search). cmd/runner's TestExecShimsAgree runs both on the same
 * cases. It exists because it starts in a third of the time a Go program does, and every call
 * pays for its start (make bench's runner-true).
 *
 * Built static (make build), so that it runs in any runner image, with or without a libc.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { EXIT_USAGE = 2, EXIT_REFUSED = 125, EXIT_NOEXEC = 126, EXIT_NOTFOUND = 127 };

/* errstr is strerror as Go spells it: the same text with a lower-case first letter. */
static const char *errstr(int e) {
	static char buf[256];
	snprintf(buf, sizeof buf, "%s", strerror(e));
	buf[0] = (char)tolower((unsigned char)buf[0]);
	return buf;
}

/* executable is Go's findExecutable: a file that is not a directory and that the caller may
 * execute. */
static int executable(const char *path) {
	struct stat st;
	if (stat(path, &st) != 0 || S_ISDIR(st.st_mode))
		return 0;
	if (faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) == 0)
		return 1;
	if (errno != ENOSYS && errno != EPERM)
		return 0;
	return (st.st_mode & 0111) != 0;
}

/* lookpath is Go's exec.LookPath for a name without a slash: the first PATH entry holding an
 * executable of that name (an empty entry means "."); NULL when there is none or when that
 * entry is relative. The result is in buf. */
static const char *lookpath(const char *file, char *buf, size_t size) {
	const char *path = getenv("PATH");
	if (path == NULL || *path == '\0')
		return NULL;
	for (const char *p = path;;) {
		const char *end = strchr(p, ':');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		const char *dir = n ? p : ".";
		if (n == 0)
			n = 1;
		if (snprintf(buf, size, "%.*s/%s", (int)n, dir, file) < (int)size && executable(buf))
			return buf[0] == '/' ? buf : NULL;
		if (end == NULL)
			return NULL;
		p = end + 1;
	}
}

/* exec_call changes to cwd (unless NULL) and executes argv (argc > 0), stderr joined to
 * stdout; it returns only the status of a failure. */
static int exec_call(const char *cwd, char **argv) {
	if (cwd != NULL && chdir(cwd) != 0) {
		fprintf(stderr, "runner: cd %s: chdir %s: %s\n", cwd, cwd, errstr(errno));
		return EXIT_REFUSED;
	}
	const char *path = argv[0];
	char found[PATH_MAX];
	if (strchr(path, '/') == NULL && (path = lookpath(argv[0], found, sizeof found)) == NULL) {
		fprintf(stderr, "runner: %s: command not found\n", argv[0]);
		return EXIT_NOTFOUND;
	}
	if (dup3(1, 2, 0) < 0) {
		fprintf(stderr, "runner: dup stdout: %s\n", errstr(errno));
		return EXIT_REFUSED;
	}
	extern char **environ;
	execve(path, argv, environ);
	int e = errno;
	fprintf(stderr, "runner: %s: %s\n", argv[0], errstr(e));
	return e == ENOENT ? EXIT_NOTFOUND : EXIT_NOEXEC;
}

/* The bounds of a call read by _await: runner.MaxBodyBytes and runner.MaxArgs. */
#define MAX_CALL (1 << 20)
#define MAX_ARGS 256

static int malformed(const char *why) {
	fprintf(stderr, "runner _await: malformed call from the runner service: %s\n", why);
	return EXIT_USAGE;
}

static int await_call(void) {
	static char buf[MAX_CALL + 1];
	size_t n = 0;
	for (;;) {
		ssize_t r = read(0, buf + n, sizeof buf - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "runner _await: read the call: %s\n", errstr(errno));
			return EXIT_REFUSED;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > MAX_CALL)
			return malformed("over 1 MiB");
	}
	if (n == 0)
		return malformed("none came (stdin was closed empty)");
	if (buf[n - 1] != '\0')
		return malformed("its last field has no NUL");
	char *cwd = NULL;
	char *args[MAX_ARGS + 1];
	int nargs = 0;
	for (char *p = buf, *next; p < buf + n; p = next) {
		next = p + strlen(p) + 1; /* before E's field is cut at its = */
		char *v = p + 1;
		switch (p[0]) {
		case 'C':
			if (cwd != NULL)
				return malformed("a second directory");
			if (*v != '/')
				return malformed("the directory is not absolute");
			cwd = v;
			break;
		case 'E': {
			char *eq = strchr(v, '=');
			if (cwd == NULL || nargs > 0)
				return malformed("a variable out of order");
			if (eq == NULL || eq == v)
				return malformed("a variable that is not KEY=VALUE");
			*eq = '\0';
			if (setenv(v, eq + 1, 1) != 0)
				return malformed("a variable that cannot be set");
			break;
		}
		case 'A':
			if (cwd == NULL)
				return malformed("an argument before the directory");
			if (nargs == MAX_ARGS)
				return malformed("over 256 arguments");
			args[nargs++] = v;
			break;
		default:
			return malformed("a field of unknown kind");
		}
	}
	if (cwd == NULL)
		return malformed("no directory");
	if (nargs == 0 || args[0][0] == '\0')
		return malformed("no command");
	args[nargs] = NULL;
	return exec_call(cwd, args);
}

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "_await") == 0)
		return await_call();
	if (argc < 2 || strcmp(argv[1], "_exec") != 0) {
		fprintf(stderr, "runner-exec: this is the shim that starts a compute call's command "
		                "(runner-exec _exec [--cwd DIR] [--] CMD [ARGS...], or runner-exec _await with "
		                "the call on stdin); inside a call there is no runner client: run runner from "
		                "the agent's shell\n");
		return EXIT_USAGE;
	}
	argv += 2;
	argc -= 2;
	const char *cwd = NULL;
	if (argc >= 2 && strcmp(argv[0], "--cwd") == 0) {
		cwd = argv[1];
		argv += 2;
		argc -= 2;
	}
	if (argc > 0 && strcmp(argv[0], "--") == 0) {
		argv++;
		argc--;
	}
	if (argc == 0) {
		if (cwd != NULL && chdir(cwd) != 0) {
			fprintf(stderr, "runner: cd %s: chdir %s: %s\n", cwd, cwd, errstr(errno));
			return EXIT_REFUSED;
		}
		fprintf(stderr, "runner _exec: no command\n");
		return EXIT_USAGE;
	}
	return exec_call(cwd, argv);
}
