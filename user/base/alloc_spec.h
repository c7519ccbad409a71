/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A spec names one of the program's own allocator functions, as --alloc, --calloc, --realloc
 * and --free do:
 *
 *   --alloc 'pool_get(size=arg1)'            a block of size bytes, returned
 *   --calloc 'zalloc(count=arg0,size=arg1)'  count * size bytes, returned
 *   --realloc 'grow(ptr=arg1,size=arg2)'     ptr's block moved to size bytes, returned
 *   --free 'pool_put(ptr=arg1)'              ptr's block given back
 *
 * It may name a pool's functions, whose blocks all go at once:
 *
 *   --pool-create 'ngx_create_pool'          makes a pool: what it allocates is the pool's
 *   --pool-alloc 'ngx_palloc(pool=arg0,size=arg1)'  a block of the pool, returned
 *   --pool-alloc 'palloc(pool=ret[-8],size=arg0)'   ... whose pool is the word 8 bytes
 *                                                   before the block returned
 *   --pool-reset 'ngx_reset_pool(pool=arg0)'        every block of the pool freed
 *   --pool-destroy 'ngx_destroy_pool(pool=arg0)'    every block freed, and the pool
 *
 * It may name CPython's object allocators, whose objects their type sizes:
 *
 *   --pyobject-alloc 'PyType_GenericAlloc(type=arg0,items=arg1+1)'  one item more
 *   --pyobject-alloc '_PyObject_New(type=arg0)'                      no items
 *
 * A name alone takes the C functions' order (malloc's, calloc's, realloc's, free's). argN is
 * the function's Nth argument, 0 to 5, as the x86-64 System V ABI passes them (rdi, rsi, rdx,
 * rcx, r8, r9); an allocating function returns the block. Each is traced as the malloc
 * family is: calls it makes to malloc count once, at the outer function.
 */
#ifndef HEAPTAP_ALLOC_SPEC_H
#define HEAPTAP_ALLOC_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h>

#include "heaptap.h"

/* A spec reads only the arguments the ABI passes in registers. */
#define ALLOC_SPEC_ARGS 6

/* A spec takes function names up to this long, C++ mangled names included. */
#define ALLOC_SPEC_NAME_MAX 255

struct alloc_spec {
	char name[ALLOC_SPEC_NAME_MAX + 1];
	const char *option; /* the option that named it: "--alloc", ... */
	int kind;	    /* HEAPTAP_KIND_MALLOC, _CALLOC, _REALLOC, _FREE or _POOL_* */
	/* The argument each of the kind's slots (malloc family order, alloc_spec__arg_name) is
	 * read from; the kind leaves the other slots unused. */
	uint8_t from[HEAPTAP_COOKIE_ARGS];
	/* --pool-alloc's pool=ret[-N] keeps N / 8 here: the pool is the word N bytes below the
	 * block returned. 0 means the pool is an argument. */
	uint8_t pool_ret;
	/* The function is CPython's (--allocator-family python), so its blocks get the Python
	 * frames that asked for them. A block it frees that heaptap never saw made comes from
	 * where the interpreter inlined its allocator: it counts as own_frees, not as an
	 * unknown free. */
	bool python;
	/* --pyobject-alloc's items=argN+1 gives the object one item more than the argument
	 * says; without items= it has none. */
	bool items_more;
	bool no_items;
};

/* The option's kind, or 0 if option is none of the spec options. */
int alloc_spec__kind(const char *option);

/*
 * Parses text, the value of option (--alloc, --calloc, --realloc, --free, --pool-*), into *out.
 * Returns 0, or -EINVAL after saying on stderr which part is wrong and what it should be.
 */
int alloc_spec__parse(const char *option, const char *text, struct alloc_spec *out);

/* Whether kind is a pool's (HEAPTAP_KIND_POOL_*). */
static inline int alloc_spec__is_pool(int kind)
{
	return kind >= HEAPTAP_KIND_POOL_CREATE && kind <= HEAPTAP_KIND_POOL_DESTROY;
}

/* The name of argument arg (0 to HEAPTAP_COOKIE_ARGS - 1) of a function of this kind, or
 * NULL if its BPF program does not read it. */
const char *alloc_spec__arg_name(int kind, unsigned int arg);

/* The register (enum heaptap_gpr) argument arg (below ALLOC_SPEC_ARGS) is passed in. */
unsigned int alloc_spec__abi_reg(unsigned int arg);

#endif
