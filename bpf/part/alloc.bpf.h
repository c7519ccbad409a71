/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The allocation path: a call begins (its arguments, its stack, realloc's old record taken
 * out), the entry programs of the malloc family, operator new and CPython's object
 * allocators; the call ends at the return programs, where its block is recorded.
 */

#define SIZE_OVERFLOW (~0ULL)

/*
 * The word at sp into c->stack.ips[0]: through the walk's copy of the stack, whose first
 * window the DWARF walk goes on with; alone with sampling, where a walk is rare.
 */
static __always_inline void read_caller(struct call *c, __u64 sp)
{
	c->copy_size = c->span;
	if (sample_interval ? bpf_probe_read_user(&c->stack.ips[0], sizeof(__u64), (void *)sp)
			    : stack_word(c, sp, &c->stack.ips[0]))
		c->stack.ips[0] = 0;
	c->copy_size = 0;
}

/* An allocator call begins: the thread's state for it, or NULL when it is not one to count
 * (not a target's thread, nested in another, or entered while probes come or go). cookie:
 * the probe's (struct args). tag: a Python object's type (its stack tagged with it), else 0. */
static __always_inline struct call *begin(void *ctx, __u64 cookie, __u64 kind, __u64 ptr,
					  __u64 size, __u64 memptr, __u64 tag)
{
	__u64 sp = PT_REGS_SP((struct pt_regs *)ctx);
	__s64 state;
	struct call *c = target_call();

	if (!c)
		return NULL;
	if (nested(c, sp)) {
		pool_malloc_begins(c, kind, ptr, size, memptr, sp);
		return NULL;
	}
	c->sp = sp;
	c->kind = kind;
	c->free_ptr = 0;
	if (pools_on)
		c->under_sp = 0;
	c->win_n = 0;
	c->attach = tracing;
	c->fixup_only = !c->attach;
	/* Decided before the stack is read: an allocation not sampled reads none. */
	c->sampled = !c->fixup_only && sampled(c, size == SIZE_OVERFLOW ? 0 : size);
	/* The caller's return address: what an exception's fixup puts back over operator
	 * new's return probe's trampoline, and where a sampled call's stack starts. */
	if (c->sampled || kind == HEAPTAP_KIND_NEW)
		read_caller(c, sp);
	if (c->fixup_only)
		return NULL;
	count_fn(cookie);
	c->fn = heaptap_cookie_fn(cookie);
	c->pool_ret = heaptap_cookie_pool_ret(cookie);
	c->ptr = ptr;
	/* A block over 4 TiB counts as 4 TiB, in its record and in every figure. */
	c->size = size > HEAPTAP_ALLOC_SIZE_MAX ? HEAPTAP_ALLOC_SIZE_MAX : size;
	c->memptr = memptr;
	c->stack.tag = tag;
	/* A CPython function's probe says where the interpreter keeps the thread's state;
	 * then every allocation of the thread (a malloc too) gets its Python frames. */
	if (python_on && (state = heaptap_cookie_py_state(cookie)))
		c->py_state = PT_REGS_IP((struct pt_regs *)ctx) + state;
	c->npy = python_on && c->sampled && c->py_state ? python_frames(c) : 0;
	c->stack_id = c->sampled ? capture_stack(ctx, c, sp) : 0;
	/*
	 * realloc takes the old record out now: once the allocator frees the old block another
	 * thread may be given its address before our return probe runs.
	 */
	c->old_pool = 0;
	c->has_old = ptr && take_record(c, ptr, &c->old, &c->old_pool) == TAKEN;
	return c;
}

static __always_inline int enter(void *ctx, __u64 cookie, __u64 kind, __u64 ptr, __u64 size,
				 __u64 memptr)
{
	begin(ctx, cookie, kind, ptr, size, memptr, 0);
	return 0;
}

static __always_inline __u64 mul_size(__u64 count, __u64 size)
{
	__u64 limit;

	if (!size)
		return 0;
	limit = SIZE_OVERFLOW / size;
	/* Keep clang from turning the check into a 128-bit multiply BPF cannot do. */
	barrier_var(limit);
	return count > limit ? SIZE_OVERFLOW : count * size;
}

/* The arguments an entry program reads (the first HEAPTAP_COOKIE_ARGS, by position), and its
 * probe's attach cookie, read once a program. */
struct args {
	__u64 v[HEAPTAP_COOKIE_ARGS];
	__u64 cookie;
};

/*
 * The probed function's arguments, each from the register its probe's cookie names: a probe
 * placed past the function's first instructions may find one copied to another register
 * and its own reused (user/sites.h). At the entry the cookie names the ABI's.
 */
static __always_inline void read_args(struct pt_regs *ctx, struct args *out)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	/* No site holds an argument in rsp or rbp (the planner keeps both the entry's); not
	 * reading them here keeps clang from sharing their ctx offsets with the programs'
	 * own reads, which the verifier refuses (a modified ctx pointer). */
	__u64 regs[HEAPTAP_GPRS] = {
		ctx->ax, ctx->cx, ctx->dx,  ctx->bx,  0,	0,	  ctx->si,  ctx->di,
		ctx->r8, ctx->r9, ctx->r10, ctx->r11, ctx->r12, ctx->r13, ctx->r14, ctx->r15,
	};
	__u32 i;

	for (i = 0; i < HEAPTAP_COOKIE_ARGS; i++)
		out->v[i] = regs[heaptap_cookie_reg(cookie, i) & (HEAPTAP_GPRS - 1)];
	out->cookie = cookie;
}

SEC("uprobe")
int malloc_enter(struct pt_regs *ctx)
{
	struct args a;

	read_args(ctx, &a);
	return enter(ctx, a.cookie, HEAPTAP_KIND_MALLOC, 0, a.v[0], 0);
}

SEC("uprobe")
int new_enter(struct pt_regs *ctx)
{
	struct args a;

	read_args(ctx, &a);
	return enter(ctx, a.cookie, HEAPTAP_KIND_NEW, 0, a.v[0], 0);
}

SEC("uprobe")
int calloc_enter(struct pt_regs *ctx)
{
	struct args a;

	read_args(ctx, &a);
	return enter(ctx, a.cookie, HEAPTAP_KIND_CALLOC, 0, mul_size(a.v[0], a.v[1]), 0);
}

SEC("uprobe")
int realloc_enter(struct pt_regs *ctx)
{
	struct args a;

	read_args(ctx, &a);
	return enter(ctx, a.cookie, HEAPTAP_KIND_REALLOC, a.v[0], a.v[1], 0);
}

SEC("uprobe")
int reallocarray_enter(struct pt_regs *ctx)
{
	struct args a;

	read_args(ctx, &a);
	return enter(ctx, a.cookie, HEAPTAP_KIND_REALLOCARRAY, a.v[0], mul_size(a.v[1], a.v[2]), 0);
}

/* (alignment, size): the alignment is not read. */
SEC("uprobe")
int memalign_enter(struct pt_regs *ctx)
{
	struct args a;

	read_args(ctx, &a);
	return enter(ctx, a.cookie, HEAPTAP_KIND_MEMALIGN, 0, a.v[1], 0);
}

/* (&ptr, alignment, size) */
SEC("uprobe")
int posix_memalign_enter(struct pt_regs *ctx)
{
	struct args a;

	read_args(ctx, &a);
	return enter(ctx, a.cookie, HEAPTAP_KIND_POSIX_MEMALIGN, 0, a.v[2], a.v[0]);
}

/*
 * CPython's PyTypeObject, as 3.8 to 3.12 lay it out: the sizes of an instance and of each of
 * its items, and the flags that say what the instance's block holds before the object (the
 * GC's header; 3.11's managed __dict__, 3.12's managed weak references).
 */
#define PY_TYPE_BASICSIZE 0x20 /* tp_basicsize, then tp_itemsize */
#define PY_TYPE_FLAGS 0xa8
#define PY_TPFLAGS_PREHEADER (1ULL << 3 | 1ULL << 4)
#define PY_TPFLAGS_HAVE_GC (1ULL << 14)
#define PY_GC_HEAD 16

/*
 * (type, items) -> an object, sized as CPython sizes it: the type's basic size and, for an
 * object of items (PyType_GenericAlloc: one more than asked; _PyObject_NewVar, GC_NewVar:
 * as asked), their room, rounded up to a word; after what the type's flags put before the
 * object. The block is counted under the object's address (what PyObject_GC_Del and
 * PyObject_Free are given) and its stack is tagged with the type, so that each class has
 * its sites.
 */
SEC("uprobe")
int pyobject_enter(struct pt_regs *ctx)
{
	__u64 sizes[2], flags, items, size = 0, cookie;
	struct args a;

	read_args(ctx, &a);
	cookie = a.cookie;
	items = a.v[1] + (cookie & HEAPTAP_COOKIE_ITEM_MORE ? 1 : 0);
	if (cookie & HEAPTAP_COOKIE_NO_ITEMS)
		items = 0;
	if (!bpf_probe_read_user(sizes, sizeof(sizes), (void *)(a.v[0] + PY_TYPE_BASICSIZE)) &&
	    !bpf_probe_read_user(&flags, sizeof(flags), (void *)(a.v[0] + PY_TYPE_FLAGS)) &&
	    (__s64)sizes[0] >= 0 && (__s64)sizes[1] >= 0 && items <= HEAPTAP_ALLOC_SIZE_MAX) {
		size = mul_size(items, sizes[1]);
		if (cookie & HEAPTAP_COOKIE_NO_ITEMS)
			size = sizes[0] > HEAPTAP_ALLOC_SIZE_MAX ? HEAPTAP_ALLOC_SIZE_MAX : sizes[0];
		else if (size <= HEAPTAP_ALLOC_SIZE_MAX)
			size = (size + sizes[0] + 7) & ~7ULL;
		if (flags & PY_TPFLAGS_HAVE_GC)
			size += PY_GC_HEAD;
		if (flags & PY_TPFLAGS_PREHEADER)
			size += 2 * sizeof(__u64);
	}
	begin(ctx, cookie, HEAPTAP_KIND_MALLOC, 0, size, 0, a.v[0]);
	return 0;
}

/* The outer call this return belongs to, or NULL for the return of an inner call. */
static __always_inline struct call *returning_call(void *ctx)
{
	__u64 sp = PT_REGS_SP((struct pt_regs *)ctx);
	struct call *c;

	/* No state: not a target's thread. Idle: the call began before attach, or a tail
	 * call's return already ran. */
	c = thread_call(0);
	if (!c || !c->sp)
		return NULL;
	/* The return pops the return address: sp is 8 above the entry's. */
	if (sp < c->sp + 8)
		return NULL;
	if (sp > c->sp + 8) {
		abandon(c);
		return NULL;
	}
	/* Entered while probes came or went, or ending while they go (frozen): not counted. */
	if (c->fixup_only || !tracing) {
		c->sp = 0;
		return NULL;
	}
	return c;
}

/* A call ended: counted, with what it did (p: its process's counters, proc_of). */
static __always_inline void count_end(struct call *c, struct heaptap_proc *p, bool failed,
				      bool returned, bool freed)
{
	struct heaptap_fn_stats *st = fn_of(c->fn);

	__sync_fetch_and_add(&counters.alloc_calls, 1);
	PROC_ADD_TO(p, alloc_calls, 1);
	if (failed) {
		__sync_fetch_and_add(&counters.failed, 1);
		PROC_ADD_TO(p, failed, 1);
	}
	if (!st)
		return;
	__sync_fetch_and_add(&st->calls, 1);
	if (failed)
		__sync_fetch_and_add(&st->failed, 1);
	if (returned)
		__sync_fetch_and_add(&st->returned, 1);
	if (freed)
		__sync_fetch_and_add(&st->freed, 1);
}

static __always_inline void finish(struct call *c, __u64 ptr)
{
	bool resize = c->kind == HEAPTAP_KIND_REALLOC || c->kind == HEAPTAP_KIND_REALLOCARRAY;
	/* A pool's block, or a block of a pool moved by realloc: the new one is the pool's. */
	__u64 pool = c->kind == HEAPTAP_KIND_POOL_ALLOC ? c->pool : resize ? c->old_pool : 0;

	struct heaptap_proc *p = proc_of(c->slot);
	__u64 made, at;

	/* The pool written before the block, a pool's or a realloc's (a NULL or unreadable
	 * one: a plain block). */
	if (c->pool_ret && ptr && (c->kind == HEAPTAP_KIND_POOL_ALLOC || resize)) {
		at = ptr - 8 * (c->pool_ret < HEAPTAP_POOL_RET_MAX ? c->pool_ret
								   : HEAPTAP_POOL_RET_MAX);
		if (bpf_probe_read_user(&pool, sizeof(pool), (void *)at))
			pool = 0;
	}
	c->sp = 0;
	if (!resize || !c->ptr) {
		count_end(c, p, !ptr, ptr, false);
		if (ptr && c->sampled) {
			made = record_block(c, p, ptr, c->size);
			if (made && pool)
				join_pool(c, ptr, pool, c->size, made);
		} else if (ptr) {
			forget_reused(c, ptr);
		}
		return;
	}
	/*
	 * realloc(old, n): a non-NULL result means old is gone (moved, or resized in place and
	 * recorded again at its new size); NULL with n == 0 means old was freed; any other NULL
	 * is a failure that leaves old allocated.
	 */
	if (!ptr && c->size != 0) {
		struct heaptap_block old = block_key(c, c->ptr);

		count_end(c, p, true, false, false);
		if (c->has_old && table_put(&old, &c->old)) {
			/* Untracked from now on, as when record_block finds the map full. */
			__sync_fetch_and_add(&counters.dropped_allocs, 1);
			account_free(p, &c->old);
		} else if (c->has_old && pool) {
			join_pool(c, c->ptr, pool, heaptap_alloc_size(&c->old),
				  heaptap_alloc_time(&c->old));
		}
		return;
	}
	count_end(c, p, false, ptr, true);
	/* A block the pools took from malloc, moved or freed by the program's realloc. */
	pool_malloc_freed(c, c->ptr);
	if (c->has_old)
		account_free(p, &c->old);
	else
		untracked_free(c, c->ptr, false);
	if (ptr && c->sampled) {
		made = record_block(c, p, ptr, c->size);
		if (made && pool)
			join_pool(c, ptr, pool, c->size, made);
	} else if (ptr) {
		forget_reused(c, ptr);
	}
}

SEC("uretprobe")
int BPF_KRETPROBE(alloc_return, __u64 ptr)
{
	struct call *c = returning_call(ctx);

	if (c)
		finish(c, ptr);
	else if (pools_on)
		pool_malloc_returns(thread_call(0), PT_REGS_SP(ctx), ptr);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(posix_memalign_return, int err)
{
	struct call *c = returning_call(ctx);
	__u64 ptr = 0;

	if (!c) {
		c = thread_call(0);
		/* A pool's, through its out pointer. */
		if (pools_on && c && c->under_sp &&
		    (err || c->under_kind != HEAPTAP_KIND_POSIX_MEMALIGN ||
		     bpf_probe_read_user(&ptr, sizeof(ptr), (void *)c->under_old)))
			ptr = 0;
		if (pools_on)
			pool_malloc_returns(c, PT_REGS_SP(ctx), ptr);
		return 0;
	}
	/* The block is only reported through the out pointer, and only on success. */
	if (err || bpf_probe_read_user(&ptr, sizeof(ptr), (void *)c->memptr))
		ptr = 0;
	finish(c, ptr);
	return 0;
}
