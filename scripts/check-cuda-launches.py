#!/usr/bin/env python3
"""Every kernel the host code of a CUDA translation unit launches has device code.

nvcc's front end (EDG) decides which kernel templates get device code and host
launch stubs; the host compiler (g++) compiles the host code again from source.
Where the two disagree about a constraint (EDG found a requires-expression false
that g++ found true: seen with nvcc 13 inside model's member lambdas), g++
instantiates a launch whose wrapper keeps cudafe's generic body,
cudaLaunchKernel(0, ...): at run time "invalid device function", and only on a
GPU. This finds such launches without one: each file is compiled with host code
at -O0 (so the __wrapper__device_stub_* functions stay out of line) and device
code as PTX only (fast), and every wrapper that calls cudaLaunchKernel itself
rather than its kernel's static __device_stub__ is reported.

Objects (FILE.o) among the files are read as they are, not compiled: the CMake
build's own objects of tests/cuda (host code at -O0 there for this reason), so
CI does not compile those files twice.

usage: check-cuda-launches.py NVCC OUTDIR -I... -D... -- FILE.cu|FILE.o...
"""
import bisect
import concurrent.futures
import os
import re
import subprocess
import sys


def launches_without_device_code(obj):
    """The demangled wrappers of obj that launch no registered kernel, and how many wrappers there are."""
    syms = subprocess.run(["readelf", "-sW", obj], capture_output=True, text=True, check=True).stdout
    wrappers = []  # (section index, start, end, name)
    for line in syms.splitlines():
        p = line.split()
        if len(p) >= 8 and p[3] == "FUNC" and "__wrapper__device_stub_" in p[7]:
            start = int(p[1], 16)
            wrappers.append((p[6], start, start + int(p[2]), p[7]))
    sections = {}
    for line in subprocess.run(["readelf", "-SW", obj], capture_output=True, text=True, check=True).stdout.splitlines():
        m = re.match(r"\s*\[\s*(\d+)\]\s+(\S+)", line)
        if m:
            sections[m.group(1)] = m.group(2)
    # The relocations from objdump, not readelf -rW: on test_cuda's objects (30-55 MB, 60 000 sections)
    # readelf spends about a minute in the kernel on each (55 s against 0.4 s; 172 s of the CI run).
    calls = {}  # section name -> offsets of relocations against cudaLaunchKernel
    section = None
    for line in subprocess.run(["objdump", "-r", obj], capture_output=True, text=True, check=True).stdout.splitlines():
        m = re.match(r"RELOCATION RECORDS FOR \[(\S+)\]:", line)
        if m:
            section = m.group(1)
        elif section and "cudaLaunchKernel" in line:
            calls.setdefault(section, []).append(int(line.split()[0], 16))
    for offsets in calls.values():
        offsets.sort()
    bad = []
    for index, start, end, name in wrappers:
        offsets = calls.get(sections.get(index, ""), [])
        i = bisect.bisect_left(offsets, start)
        if i < len(offsets) and offsets[i] < end:
            bad.append(subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip())
    return bad, len(wrappers)


def main():
    if len(sys.argv) < 4 or "--" not in sys.argv:
        sys.exit(__doc__)
    nvcc, outdir = sys.argv[1], sys.argv[2]
    cut = sys.argv.index("--")
    flags, files = sys.argv[3:cut], sys.argv[cut + 1:]
    os.makedirs(outdir, exist_ok=True)
    common = ["-std=c++20", "-O0", "-gencode", "arch=compute_90,code=compute_90", "-Xcicc", "-O0",
              "--expt-relaxed-constexpr", "-diag-suppress=1675,186,68"]

    def check(f):
        if f.endswith(".o"):
            if not os.path.isfile(f):
                return f, None, "no such object (build the target first)"
            bad, n = launches_without_device_code(f)
            return f, bad, n
        obj = os.path.join(outdir, os.path.basename(f) + ".launch-check.o")
        r = subprocess.run([nvcc, *common, *flags, "-c", f, "-o", obj], capture_output=True, text=True)
        if r.returncode != 0:
            return f, None, r.stdout + r.stderr
        bad, n = launches_without_device_code(obj)
        os.remove(obj)
        return f, bad, n

    failed = False
    jobs = int(os.environ.get("CTNN_JOBS", os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for f, bad, info in pool.map(check, files):
            if bad is None:
                failed = True
                print(f"{f}: did not compile:\n{info}" if not f.endswith(".o") else f"{f}: {info}")
                continue
            print(f"{f}: {info} kernel launches, {len(bad)} without device code")
            for b in bad:
                failed = True
                print(f"  launched without device code (nvcc's front end did not instantiate it): {b}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
