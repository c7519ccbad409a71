/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Python objects' stacks (--pyobject-alloc) hold CPython 3.11's frames. This module finds
 * where the BPF side reads the current thread's frames, and reads what a frame it recorded
 * (HEAPTAP_PY_FRAME: a code object and an instruction) says: function, file and line, from
 * the target's memory. Everything read there is the target's, so it is checked for size and
 * the caller escapes it.
 */
#ifndef HEAPTAP_PYTHON_H
#define HEAPTAP_PYTHON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct target_file;

/*
 * The link-time address of the word where the interpreter in file keeps its current thread's
 * state (PyThreadState_Get reads it first: mov disp32(%rip),%rax), or 0 when file is not
 * CPython 3.11's (libpython3.11 or a python3.11 program) or the code is otherwise.
 */
uint64_t python__thread_state(const struct target_file *file);

/* Reads a Python frame's function (its code object's co_qualname), file (co_filename) and
 * line (from co_linetable) from process pid; function and file are malloc'd, line is 0 where
 * unknown. False when the code object cannot be read. */
bool python__frame(int pid, uint64_t word, char **function, char **file, int *line);

/* The name of the Python type at type (its tp_name, 3 words in), read from process pid;
 * malloc'd, NULL when it cannot be read. */
char *python__type_name(int pid, uint64_t type);

/*
 * The line of instruction (in code units, from the code's first) by a 3.11 location table
 * (co_linetable) of n bytes, its code starting at line first; 0 when the table does not
 * cover it or gives no line. For tests.
 */
int python__line(const uint8_t *table, size_t n, int first, long instruction);

#endif
