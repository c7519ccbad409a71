// SPDX-License-Identifier: GPL-2.0
#include <stdio.h>
#include <string.h>

#include "target/families.h"

static const struct family families[] = {
	{ "nginx", 0,
	  { { "--pool-create", "ngx_create_pool" },
	    { "--pool-alloc", "ngx_palloc(pool=arg0,size=arg1)" },
	    { "--pool-alloc", "ngx_pnalloc(pool=arg0,size=arg1)" },
	    { "--pool-alloc", "ngx_pcalloc(pool=arg0,size=arg1)" },
	    { "--pool-alloc", "ngx_pmemalign(pool=arg0,size=arg1)" },
	    { "--pool-reset", "ngx_reset_pool(pool=arg0)" },
	    { "--pool-destroy", "ngx_destroy_pool(pool=arg0)" },
	    /* It frees a pool's large block early; a small one it declines counts as freed. */
	    { "--free", "ngx_pfree(ptr=arg1)" } } },
	/* APR's pools (Apache httpd's, Subversion's) destroy a child pool by its own
	 * apr_pool_destroy, called by its parent's clear or destroy. A pool's name is its tag
	 * (apr_pool_tag), after 10 words of apr_pool_t (APR 1.4 to 1.7). */
	{ "apr", 80,
	  { { "--pool-create", "apr_pool_create_ex" },
	    { "--pool-create", "apr_pool_create_unmanaged_ex" },
	    { "--pool-alloc", "apr_palloc(pool=arg0,size=arg1)" },
	    { "--pool-alloc", "apr_pcalloc(pool=arg0,size=arg1)" },
	    { "--pool-reset", "apr_pool_clear(pool=arg0)" },
	    { "--pool-destroy", "apr_pool_destroy(pool=arg0)" } } },
	/* PostgreSQL's palloc takes the current memory context, which the chunk's header names
	 * (the word before it, as GetMemoryChunkContext reads it, up to version 15). The name's
	 * place and AllocSetContextCreateInternal are 13's to 15's. */
	{ "postgres", 56, /* MemoryContextData's name, after 7 words */
	  { { "--pool-create", "AllocSetContextCreateInternal" },
	    { "--pool-alloc", "palloc(pool=ret[-8],size=arg0)" },
	    { "--pool-alloc", "palloc0(pool=ret[-8],size=arg0)" },
	    { "--pool-alloc", "palloc_extended(pool=ret[-8],size=arg0)" },
	    { "--pool-alloc", "MemoryContextAlloc(pool=arg0,size=arg1)" },
	    { "--pool-alloc", "MemoryContextAllocZero(pool=arg0,size=arg1)" },
	    { "--pool-alloc", "MemoryContextAllocZeroAligned(pool=arg0,size=arg1)" },
	    { "--pool-alloc", "MemoryContextAllocExtended(pool=arg0,size=arg1)" },
	    { "--pool-alloc", "MemoryContextAllocHuge(pool=arg0,size=arg1)" },
	    { "--realloc", "repalloc(ptr=arg0,size=arg1,pool=ret[-8])" },
	    { "--realloc", "repalloc_huge(ptr=arg0,size=arg1,pool=ret[-8])" },
	    { "--free", "pfree(ptr=arg0)" },
	    { "--pool-reset", "MemoryContextReset(pool=arg0)" },
	    { "--pool-reset", "MemoryContextResetOnly(pool=arg0)" },
	    { "--pool-destroy", "MemoryContextDelete(pool=arg0)" } } },
	/* Every CPython instance of a class (and of the types made as classes are) comes from
	 * one call of PyType_GenericAlloc, where its type is known; the interpreter frees one by
	 * PyObject_GC_Del or PyObject_Free, which get the object. The object allocator's own
	 * functions are traced where they are called: link-time optimisation inlined them into
	 * most of the interpreter's callers (extension modules call them). */
	{ "python", 0,
	  { { "--pyobject-alloc", "PyType_GenericAlloc(type=arg0,items=arg1+1)" },
	    /* C extensions' types that do not use tp_alloc make their objects here. */
	    { "--pyobject-alloc", "_PyObject_New(type=arg0)" },
	    { "--pyobject-alloc", "_PyObject_NewVar(type=arg0,items=arg1)" },
	    { "--pyobject-alloc", "_PyObject_GC_New(type=arg0)" },
	    { "--pyobject-alloc", "_PyObject_GC_NewVar(type=arg0,items=arg1)" },
	    { "--alloc", "PyObject_Malloc" },
	    { "--calloc", "PyObject_Calloc" },
	    { "--realloc", "PyObject_Realloc" },
	    { "--free", "PyObject_Free" },
	    { "--free", "PyObject_GC_Del" },
	    { "--alloc", "PyMem_Malloc" },
	    { "--calloc", "PyMem_Calloc" },
	    { "--realloc", "PyMem_Realloc" },
	    { "--free", "PyMem_Free" } },
	  true },
	/* GLib's slices (g_slice_new, g_slice_free, and GList's and GSList's nodes): blocks
	 * of a size the caller gives again at the free. A large one comes from malloc inside
	 * g_slice_alloc: counted once, as the slice. */
	{ "glib", 0,
	  { { "--alloc", "g_slice_alloc(size=arg0)" },
	    { "--alloc", "g_slice_alloc0(size=arg0)" },
	    { "--alloc", "g_slice_copy(size=arg0)" },
	    { "--free", "g_slice_free1(ptr=arg1)" },
	    { "--free-chain", "g_slice_free_chain_with_offset(ptr=arg1,next=arg2)" } } },
};

const char *families__name(size_t i, char *function, size_t size)
{
	const char *spec;

	if (i >= sizeof(families) / sizeof(families[0]))
		return NULL;
	/* A program with the family has its first spec's function. */
	spec = families[i].specs[0][1];
	snprintf(function, size, "%.*s", (int)strcspn(spec, "("), spec);
	return families[i].name;
}

const struct family *families__get(size_t i)
{
	return i < sizeof(families) / sizeof(families[0]) ? &families[i] : NULL;
}
