/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The shells' completion of heaptap's command line, made from the options' table
 * (cmdline.h): `heaptap --completion bash|zsh` writes the script, which make install puts
 * where each shell looks for it.
 */
#ifndef HEAPTAP_COMPLETION_H
#define HEAPTAP_COMPLETION_H

#include <stdio.h>

/* Writes the completion script for shell ("bash" or "zsh") to f: 0, or -EINVAL after saying
 * that heaptap knows no such shell. */
int completion__print(FILE *f, const char *shell);

#endif
