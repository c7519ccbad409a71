"""What a target holds cannot crash heaptap: its registers and stack (a frame without CFI,
rbp near 2^64)."""
from lib import Heaptap, Target, check, check_true, functions, size_row, test
from test_accounting import check_exact


@test
def test_no_cfi_frame_with_rbp_near_2_to_the_64():
    # wildbp's nocfi_call sets rbp to -16 and calls malloc and free: the rule heaptap
    # guesses for a frame without CFI reads the caller at rbp + 8, which is 2^64 - 8.
    target = Target("wildbp")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--stack", "dwarf"])
    ht.attached()
    target.do("leak")
    target.do("churn")
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check_true("the target still runs", target.alive())
    check("live bytes", final["live_bytes"], 3 * 333)
    check("live allocations", final["live_allocs"], 3)
    check("allocation calls", final["alloc_calls"], 3 + 50)
    check("free calls", final["free_calls"], 50)
    for size, allocs, frees in ((333, 3, 0), (77, 50, 50)):
        row = size_row(final, size)
        check(f"size {size}: allocs, frees", (row["allocs"], row["frees"]), (allocs, frees))
    check_exact(final)
    check("sites", [(s["live_bytes"], s["live"]) for s in final["sites"]], [(999, 3)])
    check("the stack ends at the frame without CFI",
          functions(final["sites"][0]), ["malloc", "call_malloc", "nocfi_call"])
    check("return addresses without CFI", final["stacks"]["no_cfi"], 1)
    check("stacks cut short", final["stacks"]["truncated"], 0)
