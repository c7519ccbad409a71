/* SPDX-License-Identifier: GPL-2.0 */
/* These read what /proc says of a process: identity, state, memory mappings, environment. */
#ifndef HEAPTAP_PROC_H
#define HEAPTAP_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proc_map {
	uint64_t start;
	uint64_t end;
	uint64_t offset; /* file offset of start */
	dev_t dev;
	uint64_t inode;
	bool exec;
	char *path;   /* as the process sees it; NULL for anonymous memory */
	bool deleted; /* the file was unlinked or replaced since it was mapped */
};

struct proc_maps {
	struct proc_map *maps; /* in address order */
	size_t n;
};

enum proc_state {
	PROC_RUNNING,
	PROC_MISSING, /* no such PID */
	PROC_KERNEL_THREAD,
	PROC_ZOMBIE, /* exited, not yet reaped */
};

enum proc_state proc__state(int pid);
/* The command name (comm), escaped (escape.h): size 64 holds any; "?" when it cannot be
 * read. */
void proc__comm(int pid, char *buf, size_t size);
/* The process a thread belongs to (a TID is accepted where a PID is); 0 if unknown. */
int proc__tgid(int pid);
/* VmRSS in bytes, of heaptap itself when pid is 0; 0 when it cannot be read. */
uint64_t proc__rss(int pid);

/* Finds the first mapping whose name (the end of its maps line) is name, such as "[uprobes]". */
int proc__find_mapping(int pid, const char *name, uint64_t *start, uint64_t *end);

/* Identifies the file at path as the kernel names it (and maps shows it): by its inode, and
 * by the device of its superblock from the mountinfo of process pid (0: heaptap's own), in
 * whose namespace path is, or stat's device where mountinfo cannot tell. */
int proc__file_id(const char *path, int pid, unsigned int *major, unsigned int *minor,
		  uint64_t *ino);

/* Finds the span of the executable mappings of the file at path (as the process names it), or
 * of the file heaptap opens at open_path, whatever name the kernel gives it. */
int proc__code_range(int pid, const char *path, const char *open_path, uint64_t *start,
		     uint64_t *end);

/* Reads /proc/PID/maps; negative errno on failure. */
int proc_maps__read(int pid, struct proc_maps *out);
/* Parses text already read (maps, or smaps, whose lines that are no mapping are skipped);
 * text is cut into lines in place. */
int proc_maps__parse(char *text, struct proc_maps *out);
/* Runs proc__find_mapping's search in text already read. */
int proc_maps__find_name(const char *text, const char *name, uint64_t *start, uint64_t *end);
void proc_maps__free(struct proc_maps *m);
/* The file-backed mapping holding addr, or NULL. */
const struct proc_map *proc_maps__find(const struct proc_maps *m, uint64_t addr);

/*
 * A path heaptap can open for the file behind a mapping, malloc'd: through /proc/PID/root,
 * so a process in another mount namespace works, or through /proc/PID/map_files when the
 * file there is no longer the mapped one. NULL when neither reaches it.
 */
char *proc__mapped_file(int pid, const struct proc_map *m);

/* The value of name in the process's initial environment, malloc'd, or NULL. */
char *proc__getenv(int pid, const char *name);

/* Reads size bytes at addr in process pid into buf; false unless all of them could be read. */
bool proc__read(int pid, uint64_t addr, void *buf, size_t size);

/* Reads into buf, with a NUL after them, up to size - 1 bytes of the C string that the pointer
 * at addr in process pid points to (what can be read: it may end a mapping). Returns the
 * bytes read, 0 when none could be (the pointer NULL or unreadable). */
size_t proc__read_string_at(int pid, uint64_t addr, char *buf, size_t size);

/* Reads a whole (proc) file, or what a descriptor gives until end of file, into a malloc'd,
 * NUL-terminated buffer; negative errno on failure. len may be NULL. */
int proc__read_file(const char *path, char **buf, size_t *len);
int proc__read_fd(int fd, char **buf, size_t *len);

#endif
