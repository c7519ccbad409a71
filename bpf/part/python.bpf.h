/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Python frames (--pyobject-alloc): read from CPython's thread state where a thread has
 * them, for its allocations' stacks (stacks.bpf.h). The entry program of CPython's object
 * allocators begins as every allocation does: it is with the others, in alloc.bpf.h.
 */

/* Python objects traced (--pyobject-alloc): Python frames read where a thread has them. */
const volatile __u32 python_on = 0;

/*
 * CPython 3.11's frames, innermost first: the thread state the interpreter holds (the GIL's
 * holder's), if it is this thread's (its thread_id, pthread_self(), 19 words in, is the
 * thread's fs base on x86-64, as namespaces and forks leave it: a thread that let the GIL
 * go may allocate meanwhile), points to its _PyCFrame (7 words in), which points to the
 * current _PyInterpreterFrame (1 word in); each frame has its code object 4 words in, the
 * frame that called it 6 words in, and its last instruction started 7 words in. Into c->py.
 */
#define PY_TSTATE_CFRAME 56
#define PY_TSTATE_THREAD_ID 152
#define PY_CFRAME_FRAME 8

static __always_inline __u64 python_frames(struct call *c)
{
	__u64 at, self, frame, f[8], n = 0, i;

	if (bpf_probe_read_user(&at, sizeof(at), (void *)c->py_state) || !at ||
	    bpf_probe_read_user(&self, sizeof(self), (void *)(at + PY_TSTATE_THREAD_ID)) ||
	    self != bpf_get_current_task_btf()->thread.fsbase ||
	    bpf_probe_read_user(&at, sizeof(at), (void *)(at + PY_TSTATE_CFRAME)) || !at ||
	    bpf_probe_read_user(&frame, sizeof(frame), (void *)(at + PY_CFRAME_FRAME)))
		return 0;
	for (i = 0; i < HEAPTAP_PY_DEPTH && frame; i++) {
		if (bpf_probe_read_user(f, sizeof(f), (void *)frame) ||
		    f[4] >> HEAPTAP_PY_CODE_BITS)
			break;
		at = f[7] >= f[4] && (f[7] - f[4]) / 2 < HEAPTAP_PY_AT_MAX ? (f[7] - f[4]) / 2
									  : HEAPTAP_PY_AT_MAX;
		c->py[i] = HEAPTAP_PY_FRAME | at << HEAPTAP_PY_CODE_BITS | f[4];
		n++;
		frame = f[6];
	}
	return n;
}
