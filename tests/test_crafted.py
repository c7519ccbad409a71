"""What a target holds cannot crash heaptap: its registers and stack (a frame without CFI,
rbp near 2^64), its CFI (a register in the millions) and the files it maps (ELF headers
whose offsets and sizes wrap around)."""
import os
import struct
import subprocess
import tempfile

import lib
from lib import Heaptap, Target, check, check_true, functions, size_row, test
from test_accounting import check_exact


@test(sanitized=True)
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


@test
def test_cfi_naming_a_register_in_the_millions_is_not_read():
    # badcfi's bigreg_call has CFI that names register 1,736,703: libdw, asked for any rule
    # in the program, would grow and clear a 40 MB register array per lookup. The program's
    # .eh_frame is refused, said why, and its frames are walked by frame pointer.
    target = Target("badcfi")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--stack", "dwarf"])
    ht.attached()
    target.do("leak")
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check_true("the target still runs", target.alive())
    check("live bytes", final["live_bytes"], 3 * 333)
    check("allocation calls", final["alloc_calls"], 3)
    check_exact(final)
    check("CFI sections refused", final["stacks"]["cfi_refused"], 1)
    check_true("said why", "its .eh_frame is not read (names register 1736703"
               in ht.stderr_text())
    check("sites", [(s["live_bytes"], s["live"]) for s in final["sites"]], [(999, 3)])
    check("the stack, walked by frame pointer through the program",
          functions(final["sites"][0])[:4], ["malloc", "call_malloc", "bigreg_call", "main"])
    check("stacks cut short", final["stacks"]["truncated"], 0)


PT_LOAD, PT_INTERP = 1, 3


def crafted_elf(phdrs, symbol):
    """A small shared object, valid ELF but for its program headers: phdrs is a list of
    (type, offset, vaddr, filesz); symbol (address, size) a function in .dynsym."""
    dynstr = b"\0crafted\0"
    shstr = b"\0.dynsym\0.dynstr\0.shstrtab\0"
    phoff = 64
    dynstr_off = phoff + 56 * len(phdrs)
    dynsym_off = (dynstr_off + len(dynstr) + 7) & ~7
    dynsym = bytes(24) + struct.pack("<IBBHQQ", 1, 0x12, 0, 1, *symbol)  # GLOBAL FUNC
    shstr_off = dynsym_off + len(dynsym)
    shoff = (shstr_off + len(shstr) + 7) & ~7
    shdrs = [bytes(64),
             struct.pack("<IIQQQQIIQQ", 1, 11, 2, 0, dynsym_off, len(dynsym), 2, 1, 8, 24),
             struct.pack("<IIQQQQIIQQ", 9, 3, 2, 0, dynstr_off, len(dynstr), 0, 0, 1, 0),
             struct.pack("<IIQQQQIIQQ", 17, 3, 0, 0, shstr_off, len(shstr), 0, 0, 1, 0)]
    ehdr = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01", 3, 62, 1, 0, phoff, shoff,
                       0, 64, 56, len(phdrs), 64, len(shdrs), 3)
    image = bytearray(ehdr)
    for ptype, offset, vaddr, filesz in phdrs:
        image += struct.pack("<IIQQQQQQ", ptype, 5, offset, vaddr, vaddr, filesz, filesz, 0x1000)
    image += dynstr
    image += bytes(dynsym_off - len(image)) + dynsym + shstr
    image += bytes(shoff - len(image)) + b"".join(shdrs)
    return bytes(image)


CRAFTED = {
    # The function's file offset is 2^64 - 8: "offset + 8 > file size" wraps to 0.
    "offset_wraps.so": crafted_elf([(PT_LOAD, 2**64 - 8, 0x1000, 0x1000)], (0x1000, 64)),
    # The segment ends past 2^64: "vaddr + filesz" wraps.
    "end_wraps.so": crafted_elf([(PT_LOAD, 0, 2**64 - 0x1000, 0x2000)], (2**64 - 0x800, 64)),
    # A segment far larger than the file.
    "past_the_end.so": crafted_elf([(PT_LOAD, 0x100, 0x1000, 2**63)], (0x1000, 64)),
    # The program loader's name at the last byte of the address space.
    "interp_wraps.so": crafted_elf([(PT_INTERP, 2**64 - 1, 0, 2),
                                    (PT_LOAD, 0, 0, 0x200)], (0x40, 64)),
}


@test(sanitized=True)
def test_crafted_elf_files_mapped_executable():
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, image in CRAFTED.items():
            paths.append(os.path.join(tmp, name))
            with open(paths[-1], "wb") as f:
                f.write(image)
        target = Target("mapelf", args=paths)
        with open(f"/proc/{target.target_pid}/maps") as f:
            mapped = [line.split()[5] for line in f
                      if len(line.split()) == 6 and line.split()[1].startswith("r-x")]
        check("every crafted file is mapped executable", sorted(p for p in mapped if
              p.startswith(tmp)), sorted(paths))
        ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"])
        ht.attached()
        target.do("alloc")
        final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check_true("the target still runs", target.alive())
    check("live bytes", final["live_bytes"], 4 * 48)
    check("live allocations", final["live_allocs"], 4)
    check("allocation calls", final["alloc_calls"], 4 + 10)
    check("free calls", final["free_calls"], 10)
    check("size rows", [(r["min"], r["allocs"], r["frees"]) for r in final["sizes"]],
          [(24, 10, 10), (48, 4, 0)])
    check_exact(final)


@test
def test_library_path_with_a_newline_opens_no_other_file():
    """A program's RUNPATH is its own: one whose directory name holds a newline makes the
    loader's list of its libraries print a line of the program's making, here naming a FIFO.
    heaptap launching it opens nothing but regular files, and goes on (before: it opened the
    FIFO and waited for good; a device's open, as root, could act, a watchdog's arm it)."""
    with tempfile.TemporaryDirectory() as tmp:
        fifo = os.path.join(tmp, "fifo")
        os.mkfifo(fifo)
        evil = os.path.join(tmp, "a\n\t" + fifo + " (0x0)\n\tx")
        os.makedirs(evil)
        with open(os.path.join(tmp, "inj.c"), "w") as f:
            f.write("int inj(void) { return 1; }\n")
        with open(os.path.join(tmp, "prog.c"), "w") as f:
            f.write("int inj(void);\nint main(void) { return inj() - 1; }\n")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", os.path.join(evil, "libinj.so"),
                        os.path.join(tmp, "inj.c")], check=True)
        prog = os.path.join(tmp, "prog")
        subprocess.run(["gcc", "-o", prog, os.path.join(tmp, "prog.c"), "-L" + evil, "-linj",
                        "-Wl,-rpath," + evil], check=True)
        listed = subprocess.run(["/lib64/ld-linux-x86-64.so.2", "--list", prog],
                                capture_output=True, text=True).stdout
        check_true("the loader's list has a line of the program's naming the FIFO",
                   f"\n\t{fifo} (0x0)\n" in listed, listed)
        p = subprocess.Popen([lib.HEAPTAP, "--json", "-i", "1h", "--", prog],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()  # SIGKILL: heaptap takes the signals it ends on in its loop
            p.communicate()
            raise lib.Failure("heaptap still runs after 60 s: it opened the FIFO")
    check("heaptap's exit status (the program's)", p.returncode, 0)
    final = lib.parse_record(out.decode().splitlines()[-1])
    check("no allocation: the program makes none", final["alloc_calls"], 0)
