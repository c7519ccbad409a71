// SPDX-License-Identifier: GPL-2.0
/*
 * Writing a report's file (user/output.c), in a temporary directory: a new file and a
 * regular one replaced whole (mode, inode, nothing left beside it, the old file kept when
 * the report fails), and what is written in place or refused: FIFOs with and without a
 * reader, symbolic links, directories, sockets, a device, missing and closed directories,
 * and paths that change while the report is rendered.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "base/output.h"
#include "unit.h"

static char dir[64];

/* dir/name, in a rotating buffer. */
static const char *at(const char *name)
{
	static char paths[4][128];
	static unsigned int next;
	char *p = paths[next++ % 4];

	snprintf(p, sizeof(paths[0]), "%s/%s", dir, name);
	return p;
}

struct report {
	const char *text;
	int err;		 /* returned after writing text */
	void (*meanwhile)(void); /* run while the report is written */
};

static int write_report(FILE *f, const void *ctx)
{
	const struct report *r = ctx;

	fputs(r->text, f);
	if (r->meanwhile)
		r->meanwhile();
	return r->err;
}

static char *contents(const char *path)
{
	static char buf[256];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_NONBLOCK);

	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || write(fd, text, strlen(text)) < 0 || close(fd)) {
		perror(path);
		exit(2);
	}
}

static int entries(void)
{
	struct dirent *d;
	DIR *dd = opendir(dir);
	int n = 0;

	while (dd && (d = readdir(dd)))
		n += d->d_name[0] != '.';
	if (dd)
		closedir(dd);
	return n;
}

/* Writes path; the status, and what heaptap would say after "cannot write PATH: ". */
static int write_path(const char *path, mode_t mode, const struct report *r, char **why)
{
	struct output_error e = {};
	int err = output__write(path, mode, write_report, r, &e);

	*why = err ? output__strerror(path, &e) : NULL;
	if (err)
		CHECK_I64(e.err, err, "%s: the error's errno", path);
	return err;
}

static void refused(const char *path, int err, const char *why, const char *what)
{
	struct report r = { .text = "report\n" };
	char *said;

	CHECK_I64(write_path(path, 0600, &r, &said), err, "%s: refused", what);
	CHECK_STR(said, why, "%s: why", what);
	free(said);
}

static void regular_files(void)
{
	struct report r = { .text = "first\n" };
	struct stat st, before;
	char *why;

	CHECK_I64(write_path(at("report"), 0600, &r, &why), 0, "a new file");
	CHECK_STR(contents(at("report")), "first\n", "a new file: its contents");
	CHECK_TRUE(!stat(at("report"), &before) && (before.st_mode & 07777) == 0600,
		   "a new file: mode 0600");
	CHECK_I64(entries(), 1, "a new file: nothing beside it");
	r.text = "second\n";
	CHECK_I64(write_path(at("report"), 0640, &r, &why), 0, "replaced");
	CHECK_STR(contents(at("report")), "second\n", "replaced: its contents");
	CHECK_TRUE(!stat(at("report"), &st) && (st.st_mode & 07777) == 0640,
		   "replaced: the mode asked for, 0640");
	CHECK_TRUE(st.st_ino != before.st_ino, "replaced whole: a new inode");
	CHECK_I64(entries(), 1, "replaced: nothing beside it");
	/* A report that fails leaves the old file as it was. */
	r = (struct report){ .text = "half a rep", .err = -EIO };
	CHECK_I64(write_path(at("report"), 0600, &r, &why), -EIO, "a failed report");
	CHECK_STR(why, strerror(EIO), "a failed report: why");
	free(why);
	CHECK_STR(contents(at("report")), "second\n", "a failed report: the old file kept");
	CHECK_I64(entries(), 1, "a failed report: nothing beside it");
	/* /dev/null takes anything, in place. */
	r = (struct report){ .text = "discarded\n" };
	CHECK_I64(write_path("/dev/null", 0600, &r, &why), 0, "/dev/null");
	CHECK_TRUE(!stat("/dev/null", &st) && S_ISCHR(st.st_mode), "/dev/null still a device");
	unlink(at("report"));
}

static void fifos(void)
{
	struct report r = { .text = "to the reader\n" };
	char *why;
	int reader;

	CHECK_TRUE(!mkfifo(at("fifo"), 0600), "a FIFO made");
	refused(at("fifo"), -ENXIO, "no process has the FIFO open to read it", "a FIFO, no reader");
	reader = open(at("fifo"), O_RDONLY | O_NONBLOCK);
	CHECK_I64(write_path(at("fifo"), 0600, &r, &why), 0, "a FIFO with a reader");
	{
		char buf[64] = {};
		ssize_t n = read(reader, buf, sizeof(buf) - 1);

		CHECK_I64(n, (ssize_t)strlen(r.text), "the reader: bytes read");
		CHECK_STR(buf, r.text, "the reader: the report");
	}
	close(reader);
	CHECK_TRUE(!symlink(at("fifo"), at("to-fifo")), "a link to the FIFO made");
	refused(at("to-fifo"), -ENXIO, "no process has the FIFO open to read it",
		"a link to a FIFO, no reader");
	unlink(at("to-fifo"));
	unlink(at("fifo"));
}

static void links(void)
{
	struct report r = { .text = "through the link\n" };
	struct stat st, before;
	char *why;

	put(at("target"), "old contents, longer than the new\n");
	stat(at("target"), &before);
	CHECK_TRUE(!symlink("target", at("link")), "a link made");
	CHECK_I64(write_path(at("link"), 0600, &r, &why), 0, "a link to a regular file");
	CHECK_STR(contents(at("target")), r.text, "written through the link, truncated");
	CHECK_TRUE(!lstat(at("link"), &st) && S_ISLNK(st.st_mode), "the link still a link");
	CHECK_TRUE(!stat(at("target"), &st) && st.st_ino == before.st_ino &&
			   (st.st_mode & 07777) == 0644,
		   "the file linked to: the same inode, its own mode");
	CHECK_I64(entries(), 2, "nothing beside them");
	unlink(at("link"));
	unlink(at("target"));
	CHECK_TRUE(!symlink("nothing", at("dangling")), "a dangling link made");
	refused(at("dangling"), -ENOENT, "is a symbolic link to nothing", "a dangling link");
	unlink(at("dangling"));
}

static void not_files(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct output_error e = {};
	int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	mkdir(at("sub"), 0700);
	refused(at("sub"), -EISDIR, "is a directory", "a directory");
	CHECK_I64(output__check(at("sub"), &e), -EISDIR, "a directory: checked");
	CHECK_TRUE(!symlink("sub", at("to-dir")), "a link to a directory made");
	refused(at("to-dir"), -EISDIR, "is a directory", "a link to a directory");
	unlink(at("to-dir"));
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", at("socket"));
	CHECK_TRUE(sock >= 0 && !bind(sock, (struct sockaddr *)&addr, sizeof(addr)),
		   "a socket bound");
	refused(at("socket"), -EINVAL,
		"is a socket (heaptap writes files, FIFOs and character "
		"devices)",
		"a socket");
	close(sock);
	unlink(at("socket"));
	/* A file in a directory that does not exist: none can be made beside it. */
	{
		char want[160];

		snprintf(want, sizeof(want), "no file can be made in %s (%s)", at("missing"),
			 strerror(ENOENT));
		refused(at("missing/report"), -ENOENT, want, "a missing directory");
		CHECK_I64(output__check(at("missing/report"), &e), -ENOENT,
			  "a missing directory: checked");
		CHECK_TRUE(e.beside, "a missing directory: the file beside could not be made");
	}
	/* A directory closed to writing: refused, unless permissions do not apply (root). */
	chmod(at("sub"), 0500);
	if (geteuid()) {
		char want[160];

		snprintf(want, sizeof(want), "no file can be made in %s (%s)", at("sub"),
			 strerror(EACCES));
		refused(at("sub/report"), -EACCES, want, "a closed directory");
	} else {
		CHECK_I64(output__check(at("sub/report"), &e), 0, "a closed directory, as root");
	}
	chmod(at("sub"), 0700);
	CHECK_I64(output__check(at("sub/report"), &e), 0, "a new file: checked");
	CHECK_TRUE(access(at("sub/report"), F_OK) && entries() == 1, "checked: nothing left");
	rmdir(at("sub"));
}

/* What is at the path changes while the report is rendered: never replaced or written. */
static void became_fifo(void)
{
	unlink(at("moving"));
	mkfifo(at("moving"), 0600);
}

static void became_file(void)
{
	unlink(at("moving"));
	put(at("moving"), "someone else's\n");
}

static void changes(void)
{
	struct report r = { .text = "report\n", .meanwhile = became_fifo };
	struct stat st;
	char *why;

	put(at("moving"), "old\n");
	CHECK_I64(write_path(at("moving"), 0600, &r, &why), -EAGAIN, "a file that became a FIFO");
	CHECK_STR(why, "is no longer a regular file: not replaced", "a file that became a FIFO");
	free(why);
	CHECK_TRUE(!lstat(at("moving"), &st) && S_ISFIFO(st.st_mode), "the FIFO left there");
	CHECK_I64(entries(), 1, "nothing left beside it");
	r.meanwhile = became_file;
	CHECK_I64(write_path(at("moving"), 0600, &r, &why), -EAGAIN, "a FIFO that became a file");
	CHECK_STR(why, "changed since heaptap started: not written", "a FIFO that became a file");
	free(why);
	CHECK_STR(contents(at("moving")), "someone else's\n", "the file left as it was");
	unlink(at("moving"));
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	chmod(path, 0700);
	return remove(path);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/heaptap-unit.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror(dir);
		return 2;
	}
	regular_files();
	fifos();
	links();
	not_files();
	changes();
	CHECK_I64(entries(), 0, "the directory left empty");
	nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
	return unit__done("output");
}
