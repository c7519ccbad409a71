/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The shells complete heaptap's command line with a script made from the options' table
 * (cmdline.h). `heaptap --completion bash|zsh` writes the script, and make install puts it
 * where each shell looks for it.
 */
#ifndef HEAPTAP_COMPLETION_H
#define HEAPTAP_COMPLETION_H

#include <stdio.h>

/* Writes the completion script for shell ("bash" or "zsh") to f. Returns 0, or -EINVAL after
 * saying that heaptap knows no such shell. */
int completion__print(FILE *f, const char *shell);

#endif
